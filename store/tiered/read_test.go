package tiered_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// TestWalkAfterReadsOnlyItsPage: a listing resumed near the end reads the
// records after the cursor, not every record before it.
func TestWalkAfterReadsOnlyItsPage(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	a := newReplica(t, srv, bucket, t.TempDir(), opts{})
	defer a.Close()
	var keys []store.Key
	for i := range 40 {
		k := store.Key{byte(i)}
		keys = append(keys, k)
		put(t, a, k, []byte(fmt.Sprint("entry ", i)))
	}
	before := a.rt.recordGets.Load()
	var got []store.Key
	err := a.WalkAfter(context.Background(), "default", "default", keys[29], func(m store.Meta) bool {
		got = append(got, m.Key)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 10 || got[0] != keys[30] || got[9] != keys[39] {
		t.Fatalf("walk after the 30th entry visited %d entries (%v ...)", len(got), got)
	}
	if n := a.rt.recordGets.Load() - before; n != 10 {
		t.Fatalf("the walk read %d records from the shared tier, want the 10 after the cursor", n)
	}
}

// TestReadFillsNothing: Read serves an entry the hot tier lacks straight
// from the shared tier without filling the hot tier, and one the hot tier
// has without counting a hit.
func TestReadFillsNothing(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	a := newReplica(t, srv, bucket, t.TempDir(), opts{})
	b := newReplica(t, srv, bucket, t.TempDir(), opts{})
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	for _, size := range []int{100, 3 << 20} { // inline in its record, and a blob of its own
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := storetest.Data(uint64(size), size)
			key := storetest.KeyOf(fmt.Sprint("read", size))
			put(t, a, key, data)
			readAll := func() []byte {
				t.Helper()
				_, rc, err := b.Read(ctx, "default", key)
				if err != nil {
					t.Fatal(err)
				}
				defer rc.Close()
				got, err := io.ReadAll(rc)
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			if got := readAll(); !bytes.Equal(got, data) {
				t.Fatalf("Read through B: %d bytes, want %d", len(got), len(data))
			}
			b.Idle()
			if _, err := b.hot.Stat(ctx, "default", key); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("Read filled B's hot tier (Stat: %v)", err)
			}
			if got := readAll(); !bytes.Equal(got, data) { // still from the shared tier
				t.Fatalf("second Read: %d bytes", len(got))
			}
			if _, rc, err := a.Read(ctx, "default", key); err != nil {
				t.Fatal(err)
			} else {
				rc.Close()
			}
			if m, err := a.hot.Stat(ctx, "default", key); err != nil || m.Hits != 0 {
				t.Fatalf("Read of a hot entry: Stat = %d hits, %v; want 0 hits", m.Hits, err)
			}
			if st := a.Stats(); st.HotHits != 0 {
				t.Fatalf("Read counted as a Get: %+v", st)
			}
		})
	}
	if _, _, err := b.Read(ctx, "default", storetest.KeyOf("never stored")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Read of a missing entry: %v, want ErrNotFound", err)
	}
}
