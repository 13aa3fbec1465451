package tiered_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// TestQuarantineAcrossReplicas: replica A quarantines a reported entry. A
// stops serving it and does not refill it from the shared tier; the shared
// record moves aside, so replica C (empty hot tier) misses too; the same
// bytes cannot come back, different bytes replace it on every replica, and
// a restore brings the old ones back to both tiers. Inline and blob
// entries alike.
func TestQuarantineAcrossReplicas(t *testing.T) {
	srv := s3test.Start(t)
	tests := []struct {
		name string
		size int
	}{
		{"inline", 1000},
		{"blob", 3<<20 + 7},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			bucket := srv.NewBucket(t)
			a := newReplica(t, srv, bucket, t.TempDir(), opts{})
			c := newReplica(t, srv, bucket, t.TempDir(), opts{})
			defer a.Close()
			defer c.Close()
			bad, good := storetest.Data(uint64(i), tc.size), storetest.Data(uint64(i)+100, tc.size)
			key := storetest.KeyOf(tc.name)
			put(t, a, key, bad)

			// A report through C, whose hot tier lacks the entry, copies
			// it in first.
			st, err := c.Report(ctx, "default", key, store.Report{Reason: "load failed", Reporter: "c1"}, 2, false)
			if err != nil || st.Total != 1 || st.Quarantined {
				t.Fatalf("report through C: %+v, %v", st, err)
			}
			for _, who := range []string{"a1", "a2"} {
				st, err = a.Report(ctx, "default", key, store.Report{Reason: "load failed", Reporter: who}, 2, false)
				if err != nil {
					t.Fatal(err)
				}
			}
			if !st.Quarantined {
				t.Fatalf("two distinct reports on A: %+v", st)
			}
			before := a.rt.recordGets.Load()
			if _, err := read(t, a, key, 0, -1); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("Get on A after the quarantine: %v, want ErrNotFound", err)
			}
			if _, err := a.Stat(ctx, "default", key); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("Stat on A: %v", err)
			}
			if n := a.rt.recordGets.Load(); n != before {
				t.Fatalf("A asked the shared tier for a quarantined entry (%d record GETs)", n-before)
			}
			if _, err := a.shared.Stat(ctx, "default", key); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("shared record after the quarantine: %v, want moved aside", err)
			}
			fresh := newReplica(t, srv, bucket, t.TempDir(), opts{})
			defer fresh.Close()
			if _, err := read(t, fresh, key, 0, -1); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("Get on a fresh replica: %v, want ErrNotFound", err)
			}
			// C still holds it hot: quarantine is decided per replica.
			if got, err := read(t, c, key, 0, -1); err != nil || !bytes.Equal(got, bad) {
				t.Fatalf("Get on C (its own hot copy): %d bytes, %v", len(got), err)
			}

			sum := sha256.Sum256(bad)
			_, err = a.Put(ctx, "default", key, bytes.NewReader(bad), store.PutOptions{Size: int64(len(bad)), SHA256: &sum})
			if !errors.Is(err, store.ErrQuarantined) {
				t.Fatalf("Put of the quarantined bytes: %v, want ErrQuarantined", err)
			}
			if _, err := a.shared.Stat(ctx, "default", key); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the refused Put reached the shared tier: %v", err)
			}

			if _, err := a.Restore(ctx, "default", key); err != nil {
				t.Fatal(err)
			}
			if got, err := read(t, fresh, key, 0, -1); err != nil || !bytes.Equal(got, bad) {
				t.Fatalf("fresh replica after the restore: %d bytes, %v", len(got), err)
			}
			if got, err := read(t, a, key, 0, -1); err != nil || !bytes.Equal(got, bad) {
				t.Fatalf("A after the restore: %d bytes, %v", len(got), err)
			}

			if _, err := a.Quarantine(ctx, "default", key, "by hand"); err != nil {
				t.Fatal(err)
			}
			put(t, a, key, good) // the writer recompiled
			later := newReplica(t, srv, bucket, t.TempDir(), opts{})
			defer later.Close()
			for name, r := range map[string]*replica{"A": a, "another fresh replica": later} {
				if got, err := read(t, r, key, 0, -1); err != nil || !bytes.Equal(got, good) {
					t.Fatalf("%s after the replacement: %d bytes, %v", name, len(got), err)
				}
			}
			if a.IsQuarantined("default", key) {
				t.Fatal("still quarantined on A after the replacement")
			}
		})
	}
}
