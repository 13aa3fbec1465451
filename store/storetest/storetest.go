// Package storetest is the conformance suite of store.Store implementations.
//
// Run it from an implementation's tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, openBadger, corruptBadger) // the core contract
//		storetest.RunEviction(t, openBadger)        // capabilities it has
//		storetest.RunDedup(t, openBadger)
//	}
//
// The core contract (Run) is what the api relies on from any store; the
// capability suites hold what only some stores do (the S3 tier neither
// evicts nor frees blobs on Delete).
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
)

// Limits are the bounds a test asks of the store it opens; zero means
// unlimited.
type Limits struct {
	MaxBytes      int64
	MaxEntryBytes int64
}

// OpenFunc opens a store persisting in dir with the given limits. Opening
// the same dir again (after Close) must show the same entries. The suite
// closes every store it opens.
type OpenFunc func(t *testing.T, dir string, lim Limits) store.Store

// MiB is a mebibyte.
const MiB = 1 << 20

// Data returns n deterministic pseudo-random bytes derived from seed.
func Data(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n - n%8; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// KeyOf returns a key derived from a name.
func KeyOf(name string) cachekey.Key { return cachekey.Key(sha256.Sum256([]byte(name))) }

// CorruptFunc damages, in the closed store persisted in dir, the stored
// bytes of the blob whose content is data (one byte flipped in its middle is
// enough), as a disk or a bucket can. The store must then never serve the
// entry complete with wrong bytes.
type CorruptFunc func(t *testing.T, dir string, data []byte)

// Run runs the core contract every store.Store passes (core.go): round
// trips, ranges, misses, immutability and first writer wins, digest and
// size mismatches, the entry limit, integrity (through corrupt), streaming
// in bounded memory, aborted uploads storing nothing, concurrent writers of
// one key, walks, deletes, invalid arguments, Close and persistence. Usage
// is checked only for Entries; stores that evict or deduplicate run
// RunEviction and RunDedup too.
func Run(t *testing.T, open OpenFunc, corrupt CorruptFunc) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open OpenFunc)
	}{
		{"RoundTrip", testRoundTrip},
		{"Range", testRange},
		{"Miss", testMiss},
		{"IdenticalPutIsNoop", testIdentical},
		{"Conflict", testConflict},
		{"DigestMismatch", testDigestMismatch},
		{"SizeMismatch", testSizeMismatch},
		{"TooLarge", testTooLarge},
		{"Persistence", testPersistence},
		{"ConcurrentSameKey", testConcurrentSameKey},
		{"ConcurrentDifferentBytes", testConcurrentDifferentBytes},
		{"AbortedPutLeavesNothing", testAborted},
		{"Walk", testWalk},
		{"WalkManyEntries", testWalkMany},
		{"Delete", testDelete},
		{"InvalidArguments", testInvalid},
		{"Closed", testClosed},
		{"StreamingBoundedMemory", testStreaming},
		{"Integrity", func(t *testing.T, open OpenFunc) { testIntegrity(t, open, corrupt) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// RunEviction runs the capability suite of a store bounded by
// Limits.MaxBytes (capability.go): refusal past the limit (ErrFull),
// least-recently-accessed eviction, hit and access accounting, and their
// persistence across reopen.
func RunEviction(t *testing.T, open OpenFunc) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open OpenFunc)
	}{
		{"Full", testFull},
		{"EvictionByLastAccess", testEviction},
		{"ExistingKeyEvictsNothing", testExistingKeyEvictsNothing},
		{"AbortedPutReleasesReservation", testAbortedReleases},
		{"AbandonedPutEvictsNothing", testAbandonedPutEvictsNothing},
		{"HitsAndAccess", testHits},
		{"AccessPersistence", testAccessPersistence},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// RunDedup runs the capability suite of a store whose Usage counts unique
// blobs exactly and frees a blob with its last entry (capability.go).
func RunDedup(t *testing.T, open OpenFunc) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open OpenFunc)
	}{
		{"Dedup", testDedup},
		{"UsageCountsUniqueBlobs", testUsageExact},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

func openT(t *testing.T, open OpenFunc, lim Limits) (store.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s := open(t, dir, lim)
	t.Cleanup(func() { s.Close() })
	return s, dir
}

// put stores data under (ns, key) with a declared size and digest.
func put(t *testing.T, s store.Store, ns string, key cachekey.Key, data []byte) store.PutResult {
	t.Helper()
	sum := sha256.Sum256(data)
	res, err := s.Put(context.Background(), ns, key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data)), SHA256: &sum})
	if err != nil {
		t.Fatalf("Put %s/%s (%d bytes): %v", ns, key, len(data), err)
	}
	return res
}

// get reads [off, off+n) of the entry.
func get(t *testing.T, s store.Store, ns string, key cachekey.Key, off, n int64) (store.Meta, []byte) {
	t.Helper()
	m, rc, err := s.Get(context.Background(), ns, key, off, n)
	if err != nil {
		t.Fatalf("Get %s/%s: %v", ns, key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s/%s: %v", ns, key, err)
	}
	return m, b
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

// wantEntries checks Usage().Entries, the one count every store keeps
// exactly within a process.
func wantEntries(t *testing.T, s store.Store, entries int64) {
	t.Helper()
	if u := s.Usage(); u.Entries != entries {
		t.Fatalf("Usage = %+v, want %d entries", u, entries)
	}
}

func wantUsage(t *testing.T, s store.Store, entries, blobs, bytes int64) {
	t.Helper()
	u := s.Usage()
	if u.Entries != entries || u.Blobs != blobs || u.Bytes != bytes {
		t.Fatalf("Usage = %+v, want entries %d, blobs %d, bytes %d", u, entries, blobs, bytes)
	}
}

// FlipInValueLog flips one byte in the middle of the first occurrence of
// needle in the Badger value-log files (*.vlog) in dir, simulating damage on
// disk; the store must be closed. It returns the file it changed. Use a
// needle of 64 or more bytes from the middle of an entry's body.
//
// Badger truncates its last value-log file at the first damaged record when
// it opens, so damage there also removes the records after it; either way a
// correct store reports ErrCorrupt and never serves the damaged bytes.
func FlipInValueLog(dir string, needle []byte) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		return "", fmt.Errorf("list value logs in %s: %w", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("read value log: %w", err)
		}
		i := bytes.Index(b, needle)
		if i < 0 {
			continue
		}
		at := i + len(needle)/2
		fh, err := os.OpenFile(f, os.O_RDWR, 0)
		if err != nil {
			return "", fmt.Errorf("open value log: %w", err)
		}
		_, werr := fh.WriteAt([]byte{b[at] ^ 0xff}, int64(at))
		if cerr := fh.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return "", fmt.Errorf("write value log %s: %w", f, werr)
		}
		return f, nil
	}
	return "", fmt.Errorf("find %d-byte pattern in the value logs of %s: not found", len(needle), dir)
}
