package tiered_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/storetest"
	"github.com/cachesvc/cachesvc/store/tiered"
)

var quiet = slog.New(slog.DiscardHandler)

// counter is an http.RoundTripper counting GETs of blob objects and of
// entry records. While resets is above zero, each request takes one and
// fails as a connection reset would, without reaching the server (one
// transient fault of a server that works).
type counter struct {
	next       http.RoundTripper
	blobGets   atomic.Int64
	recordGets atomic.Int64
	resets     atomic.Int64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.resets.Add(-1) >= 0 {
		return nil, syscall.ECONNRESET
	}
	c.resets.Add(1) // none was left: leave it at zero
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
		c.blobGets.Add(1)
	}
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/entries/") {
		c.recordGets.Add(1)
	}
	return c.next.RoundTrip(r)
}

// replica is one process's view: a Badger hot tier in its own directory on
// the shared bucket.
type replica struct {
	*tiered.Store
	hot       *store.Badger
	shared    *s3.Store
	rt        *counter
	evictions atomic.Int64
}

type opts struct {
	hotMax, entryMax int64
	mode             tiered.Mode
	queueDir         string // default dir-queue
	maxQueueEntries  int
	maxQueueBytes    int64
	probe            time.Duration // default: no probe
	observe          func(tiered.Event)
	logger           *slog.Logger // the tiered store's; default quiet
	minFreeDisk      int64        // the hot tier's free-disk reserve; 0: its default
}

func newReplica(t testing.TB, srv *s3test.Server, bucket, dir string, o opts) *replica {
	t.Helper()
	r := &replica{rt: &counter{next: http.DefaultTransport}}
	hot, err := store.Open(store.Config{
		Dir: dir, MaxBytes: o.hotMax, MaxEntryBytes: o.entryMax, Logger: quiet, MinFreeDisk: o.minFreeDisk,
		OnEvict: func(store.Meta, string) { r.evictions.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := s3.Open(context.Background(), s3.Config{
		Endpoint: srv.Endpoint, Bucket: bucket, Prefix: "fleet/", Region: s3test.Region,
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, Insecure: true,
		PartSize: s3.MinPartSize, UsageInterval: -1, MaxRetries: 1, MaxEntryBytes: o.entryMax,
		Transport: r.rt, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := shared.ScanUsage(context.Background()); err != nil {
		t.Fatal(err)
	}
	if o.queueDir == "" {
		o.queueDir = dir + "-queue" // beside the Badger directory
	}
	if o.probe == 0 {
		o.probe = -1
	}
	if o.logger == nil {
		o.logger = quiet
	}
	ts, err := tiered.New(tiered.Config{
		Hot: hot, Shared: shared, Mode: o.mode, SpoolDir: dir + "-spool",
		QueueDir: o.queueDir, MaxQueueEntries: o.maxQueueEntries, MaxQueueBytes: o.maxQueueBytes,
		ProbeInterval: o.probe, Observe: o.observe, Logger: o.logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Store, r.hot, r.shared = ts, hot, shared
	return r
}

func bucketOf(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return "tt-" + hex.EncodeToString(sum[:8])
}

// openOn returns the conformance suite's opener of tiered stores on srv:
// one bucket per store directory, the hot tier inside it.
func openOn(srv *s3test.Server) storetest.OpenFunc {
	return func(t *testing.T, dir string, lim storetest.Limits) store.Store {
		srv.EnsureBucket(t, bucketOf(dir))
		return newReplica(t, srv, bucketOf(dir), filepath.Join(dir, "hot"), opts{hotMax: lim.MaxBytes, entryMax: lim.MaxEntryBytes})
	}
}

func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	open := openOn(srv)
	// Both copies are damaged: the hot one fails its chunk checksum, and the
	// refetch from the shared tier fails its digest.
	corrupt := func(t *testing.T, dir string, data []byte) {
		mid := len(data) / 2
		if _, err := storetest.FlipInValueLog(filepath.Join(dir, "hot"), data[mid:mid+64]); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		flipFile(t, srv.ObjectPath(bucketOf(dir), "fleet/blobs/"+hex.EncodeToString(sum[:])), mid)
	}
	storetest.Run(t, open, corrupt)
}

func TestWalkAfter(t *testing.T) {
	storetest.RunWalkAfter(t, openOn(s3test.Start(t)))
}

func flipFile(t *testing.T, path string, at int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, s store.Store, key store.Key, off, n int64) ([]byte, error) {
	t.Helper()
	_, rc, err := s.Get(context.Background(), "default", key, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func put(t testing.TB, s store.Store, key store.Key, data []byte) {
	t.Helper()
	sum := sha256.Sum256(data)
	if _, err := s.Put(context.Background(), "default", key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data)), SHA256: &sum}); err != nil {
		t.Fatalf("Put: %v", err)
	}
}

// TestReadThrough puts through replica A and reads through replica B, whose
// hot tier starts empty: whole, ranged, and with sixteen concurrent Gets
// that must cost exactly one GET of the record and one of the blob (none
// for an entry inline in its record).
func TestReadThrough(t *testing.T) {
	srv := s3test.Start(t)
	tests := []struct {
		name       string
		size       int
		concurrent int
		off, n     int64
	}{
		{"whole 4 KiB", 4 << 10, 1, 0, -1},
		{"whole multipart", 11<<20 + 3, 1, 0, -1},
		{"range on a miss", 3 << 20, 1, 1<<20 + 5, 1000},
		{"16 concurrent 4 MiB", 4 << 20, 16, 0, -1},
		{"16 concurrent ranges", 2 << 20, 16, 100, 1 << 20},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bucket := srv.NewBucket(t)
			a := newReplica(t, srv, bucket, t.TempDir(), opts{})
			b := newReplica(t, srv, bucket, t.TempDir(), opts{})
			defer a.Close()
			defer b.Close()
			data := storetest.Data(uint64(i), tc.size)
			key := storetest.KeyOf(tc.name)
			put(t, a, key, data)
			want := data
			if tc.n >= 0 {
				want = data[tc.off : tc.off+tc.n]
			}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range tc.concurrent {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					got, err := read(t, b, key, tc.off, tc.n)
					if err != nil || !bytes.Equal(got, want) {
						t.Errorf("Get through B: %d bytes, %v", len(got), err)
					}
				}()
			}
			close(start)
			wg.Wait()
			b.Idle() // the fill runs behind the readers
			wantBlob := int64(1)
			if tc.size <= s3.DefaultInlineMax {
				wantBlob = 0
			}
			if n, r := b.rt.blobGets.Load(), b.rt.recordGets.Load(); n != wantBlob || r != 1 {
				t.Fatalf("%d GETs of the blob and %d of the record from the shared tier, want %d and 1", n, r, wantBlob)
			}
			if _, err := b.hot.Stat(context.Background(), "default", key); err != nil {
				t.Fatalf("B's hot tier was not filled: %v", err)
			}
			st := b.Stats()
			if st.SharedFetches != 1 || st.FillFailures != 0 {
				t.Fatalf("Stats = %+v", st)
			}
			// Now a hot hit: no more shared reads.
			if got, err := read(t, b, key, 0, -1); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("hot read: %d bytes, %v", len(got), err)
			}
			if n, r := b.rt.blobGets.Load(), b.rt.recordGets.Load(); n != wantBlob || r != 1 {
				t.Fatalf("hot hit read the shared tier (%d blob, %d record GETs)", n, r)
			}
		})
	}
}

// TestLeaderStopsEarly closes the streaming reader after its first bytes:
// the fill goes on in the background and the hot tier gets the entry.
func TestLeaderStopsEarly(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	a := newReplica(t, srv, bucket, t.TempDir(), opts{})
	b := newReplica(t, srv, bucket, t.TempDir(), opts{})
	defer a.Close()
	defer b.Close()
	data := storetest.Data(5, 6<<20)
	key := storetest.KeyOf("early")
	put(t, a, key, data)
	_, rc, err := b.Get(context.Background(), "default", key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := b.hot.Stat(context.Background(), "default", key); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("hot tier not filled after the reader was closed early")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got, err := read(t, b, key, 0, -1); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after background fill: %d bytes, %v", len(got), err)
	}
}

// TestSharedTierDown stops the S3 server: hot entries stay readable, a Put
// fails with ErrUnavailable and leaves nothing in the hot tier either, and
// a hot miss reports the outage rather than a miss.
func TestSharedTierDown(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	a := newReplica(t, srv, bucket, t.TempDir(), opts{})
	defer a.Close()
	data := storetest.Data(7, 2<<20)
	key := storetest.KeyOf("hot")
	put(t, a, key, data)
	srv.Stop()
	if got, err := read(t, a, key, 0, -1); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("hot read with S3 down: %d bytes, %v", len(got), err)
	}
	other := storetest.KeyOf("new")
	_, err := a.Put(context.Background(), "default", other, bytes.NewReader(data[:1000]), store.PutOptions{Size: -1})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Put with S3 down = %v, want ErrUnavailable", err)
	}
	if _, err := a.hot.Stat(context.Background(), "default", other); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("failed Put left the entry in the hot tier: %v", err)
	}
	if _, err := read(t, a, storetest.KeyOf("missing"), 0, -1); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("hot miss with S3 down = %v, want ErrUnavailable", err)
	}
	srv.Restart(t)
	put(t, a, other, data[:1000])
}

// TestOpenedDuringOutage: a replica started while the shared tier is down
// says so from the start (its SharedState is what s3.Open saw, not a
// made-up success), is still ready (its hot tier serves), and sees the
// tier again with its first answer.
func TestOpenedDuringOutage(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	srv.Stop()
	hot, err := store.Open(store.Config{Dir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := s3.Open(context.Background(), s3.Config{Endpoint: srv.Endpoint, Bucket: bucket, Region: s3test.Region,
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, Insecure: true, UsageInterval: -1, MaxRetries: 1, Logger: quiet})
	if err != nil {
		t.Fatalf("s3.Open during an outage = %v, want a store that serves once the tier is back", err)
	}
	ts, err := tiered.New(tiered.Config{Hot: hot, Shared: shared, SpoolDir: t.TempDir(), ProbeInterval: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	if st := ts.SharedState(); st.Reachable || st.LastError == "" || !st.LastSuccess.IsZero() {
		t.Errorf("SharedState of a replica opened during an outage = %+v, want unreachable with its error and no success", st)
	}
	if err := ts.Ready(); err != nil {
		t.Errorf("Ready during the outage = %v, want nil (the hot tier serves)", err)
	}
	srv.Restart(t)
	if _, err := ts.Stat(context.Background(), "default", storetest.KeyOf("absent")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Stat with the tier back = %v, want ErrNotFound", err)
	}
	if !ts.SharedState().Reachable {
		t.Errorf("SharedState after an answer = %+v, want reachable", ts.SharedState())
	}
}

// TestCorruptSharedBlob damages the blob in the bucket: a replica with an
// empty hot tier never serves it complete, never keeps it, and then sees a
// miss (the entry is quarantined for the fleet).
func TestCorruptSharedBlob(t *testing.T) {
	srv := s3test.Start(t)
	for _, concurrent := range []int{1, 8} {
		bucket := srv.NewBucket(t)
		a := newReplica(t, srv, bucket, t.TempDir(), opts{})
		b := newReplica(t, srv, bucket, t.TempDir(), opts{})
		data := storetest.Data(8, 3<<20+1)
		key := storetest.KeyOf("corrupt")
		put(t, a, key, data)
		sum := sha256.Sum256(data)
		flipFile(t, srv.ObjectPath(bucket, "fleet/blobs/"+hex.EncodeToString(sum[:])), len(data)-10)
		var wg sync.WaitGroup
		for range concurrent {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := read(t, b, key, 0, -1)
				if err == nil || len(got) >= len(data) {
					t.Errorf("damaged entry served: %d of %d bytes, error %v", len(got), len(data), err)
				} else if !errors.Is(err, store.ErrCorrupt) && !errors.Is(err, store.ErrNotFound) {
					t.Errorf("read error %v, want ErrCorrupt or ErrNotFound", err)
				}
			}()
		}
		wg.Wait()
		b.Idle()
		if _, err := b.hot.Stat(context.Background(), "default", key); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("hot tier kept a damaged entry: %v", err)
		}
		if _, err := read(t, b, key, 0, -1); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("read after quarantine = %v, want ErrNotFound", err)
		}
		a.Close()
		b.Close()
	}
}

// TestHotEvictionVisible bounds the hot tier: evictions reach the OnEvict
// callback and evicted entries are fetched again from the shared tier.
func TestHotEvictionVisible(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	const size = 1 << 20
	a := newReplica(t, srv, bucket, t.TempDir(), opts{hotMax: 3 * size})
	defer a.Close()
	keys := make([]store.Key, 5)
	for i := range keys {
		keys[i] = storetest.KeyOf(string(rune('a' + i)))
		put(t, a, keys[i], storetest.Data(uint64(i), size))
	}
	if n := a.evictions.Load(); n != 2 || a.Usage().Evictions != 2 {
		t.Fatalf("OnEvict saw %d evictions, Usage %+v; want 2", n, a.Usage())
	}
	if u := a.Usage(); u.Entries != 5 {
		t.Fatalf("Usage = %+v, want the shared tier's 5 entries", u)
	}
	if got, err := read(t, a, keys[0], 0, -1); err != nil || !bytes.Equal(got, storetest.Data(0, size)) {
		t.Fatalf("read of an evicted entry: %d bytes, %v", len(got), err)
	}
	if a.Stats().SharedFetches != 1 {
		t.Fatalf("Stats = %+v, want one shared fetch", a.Stats())
	}
}
