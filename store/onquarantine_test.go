package store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// TestOnQuarantine checks that Config.OnQuarantine sees every entry the
// store quarantines, whatever the cause, once, and nothing else: not a
// second quarantine of a quarantined entry, a report below the threshold,
// a restore or a delete.
func TestOnQuarantine(t *testing.T) {
	ctx := context.Background()
	a, b, c := keyOf("a"), keyOf("b"), keyOf("c")
	tests := []struct {
		name string
		// act quarantines (or not) some of a (default, 2 MiB + 10 bytes),
		// b (other, the same bytes: one blob) and c (default, 100 bytes).
		act  func(t *testing.T, s *Badger, log *quarantineLog)
		want []entryRef
	}{
		{"admin", func(t *testing.T, s *Badger, log *quarantineLog) {
			mustQuarantine(t, s, "default", c)
			mustQuarantine(t, s, "default", c) // already quarantined
		}, []entryRef{{"default", c}}},
		{"reports reach the threshold", func(t *testing.T, s *Badger, log *quarantineLog) {
			for _, who := range []string{"x", "x", "y", "z"} {
				if _, err := s.Report(ctx, "default", c, Report{Reason: "load failed", Reporter: who}, 2, false); err != nil {
					t.Fatal(err)
				}
			}
		}, []entryRef{{"default", c}}},
		{"corrupt chunk: every entry of the blob", func(t *testing.T, s *Badger, log *quarantineLog) {
			_, u := blobOf(t, s, "default", a)
			if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(chunkKey(u, 1)) }); err != nil {
				t.Fatal(err)
			}
			if _, err := readAll(s, "default", a, 0); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("read through the deleted chunk: %v, want ErrCorrupt", err)
			}
		}, []entryRef{{"default", a}, {"other", b}}},
		{"restore and delete are not quarantines", func(t *testing.T, s *Badger, log *quarantineLog) {
			s.cfg.OnQuarantine = nil // the admin quarantine before restoring is not the point
			mustQuarantine(t, s, "default", c)
			s.cfg.OnQuarantine = log.record
			if _, err := s.Restore(ctx, "default", c); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, "default", a); err != nil {
				t.Fatal(err)
			}
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openInternal(t, Config{Dir: t.TempDir()})
			defer s.Close()
			data := pattern(1, 2*mib+10)
			mustPut(t, s, "default", a, data)
			mustPut(t, s, "other", b, data)
			mustPut(t, s, "default", c, pattern(2, 100))
			log := &quarantineLog{}
			s.cfg.OnQuarantine = log.record
			tc.act(t, s, log)
			got := log.seen()
			slices.SortFunc(tc.want, compareRefs)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("OnQuarantine saw %v, want %v", got, tc.want)
			}
		})
	}
}

func mustQuarantine(t *testing.T, s *Badger, ns string, key Key) {
	t.Helper()
	if _, err := s.Quarantine(context.Background(), ns, key, "bad build"); err != nil {
		t.Fatal(err)
	}
}

// quarantineLog records what an OnQuarantine callback sees.
type quarantineLog struct {
	mu   sync.Mutex
	refs []entryRef
}

func (l *quarantineLog) record(ns string, key Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refs = append(l.refs, entryRef{ns, key})
}

// seen returns the entries recorded, sorted.
func (l *quarantineLog) seen() []entryRef {
	l.mu.Lock()
	defer l.mu.Unlock()
	refs := slices.Clone(l.refs)
	slices.SortFunc(refs, compareRefs)
	return refs
}

func compareRefs(x, y entryRef) int {
	return cmp.Or(strings.Compare(x.ns, y.ns), bytes.Compare(x.key[:], y.key[:]))
}
