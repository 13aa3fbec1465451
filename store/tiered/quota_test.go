package tiered_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/storetest"
	"github.com/cachesvc/cachesvc/store/tiered"
)

// TestQuotaBoundsHotTier checks what a namespace quota means in a fleet: it
// bounds the replica's hot tier. Write-through Puts past it all succeed
// (the shared tier holds every entry) while the hot tier keeps the
// namespace's newest entries; an entry bigger than the quota is stored in
// the shared tier only, and refused with ErrQuota in write-behind mode,
// where the hot tier holds it until it is uploaded.
func TestQuotaBoundsHotTier(t *testing.T) {
	srv := s3test.Start(t)
	const size = 10 << 10
	quota := store.Quotas{Default: store.Quota{MaxEntries: 2, MaxBytes: 4 * size}}
	for _, mode := range []tiered.Mode{tiered.ModeThrough, tiered.ModeBehind} {
		t.Run(string(mode), func(t *testing.T) {
			r := newReplica(t, srv, srv.NewBucket(t), t.TempDir(), opts{mode: mode})
			defer r.Close()
			if err := r.hot.SetQuotas(quota); err != nil {
				t.Fatal(err)
			}
			keys := make([]store.Key, 4)
			for i := range keys {
				keys[i] = storetest.KeyOf(string(mode) + string(rune('a'+i)))
				put(t, r, keys[i], storetest.Data(uint64(i), size))
			}
			ctx := context.Background()
			for i, k := range keys {
				_, err := r.hot.Stat(ctx, "default", k)
				if inHot := err == nil; inHot != (i >= 2) {
					t.Errorf("entry %d in the hot tier: %v (%v), want only the two newest", i, inHot, err)
				}
			}
			if u := r.NamespaceUsage("default"); u.Entries != 2 || u.MaxEntries != 2 || u.Evictions != 2 {
				t.Fatalf("hot tier usage of default: %+v", u)
			}
			if ns := r.Usage().Namespaces; len(ns) != 1 || ns[0].Entries != 2 {
				t.Fatalf("Usage().Namespaces = %+v, want the hot tier's", ns)
			}
			big := storetest.Data(9, 5*size)
			_, err := r.Put(ctx, "default", storetest.KeyOf(string(mode)+"big"), bytes.NewReader(big), store.PutOptions{Size: int64(len(big))})
			switch mode {
			case tiered.ModeThrough:
				if err != nil || r.Stats().HotPutFailures != 1 {
					t.Fatalf("write-through Put past the hot tier's quota: %v, stats %+v", err, r.Stats())
				}
				if got, err := read(t, r, storetest.KeyOf(string(mode)+"big"), 0, -1); err != nil || !bytes.Equal(got, big) {
					t.Fatalf("read back from the shared tier: %d bytes, %v", len(got), err)
				}
				// The hot tier can never hold it: the read skips the fill,
				// which is no failure (it was a warning and an error count on every read).
				waitFor(t, 10*time.Second, "a skipped fill", func() bool { return r.Stats().FillsSkipped >= 1 })
				if st := r.Stats(); st.FillFailures != 0 {
					t.Errorf("reads of an entry larger than the hot tier's quota: %+v, want no fill failures", st)
				}
			case tiered.ModeBehind:
				if !errors.Is(err, store.ErrQuota) {
					t.Fatalf("write-behind Put past the hot tier's quota = %v, want ErrQuota", err)
				}
			}
		})
	}
}
