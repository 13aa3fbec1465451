package s3_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// TestUsageCountsSmallEntries: entries of at most InlineMax bytes live in
// their record, not in blobs/, and Usage counted the bytes of blobs/ only:
// a bucket of small entries showed "0 B in N entries" on every replica's
// dashboard, stats and cachesvc_store_bytes. Bytes now counts the records
// too (what the bucket holds for the entries; an inline entry's bytes are
// base64 in its record, so they count about 4/3 of their size plus the
// metadata), from this process's Puts and Deletes and from a listing
// alike, with no read of any record.
func TestUsageCountsSmallEntries(t *testing.T) {
	srv := s3test.Start(t)
	srv.EnsureBucket(t, "usage")
	s := open(t, config(srv, "usage"))
	defer s.Close()
	ctx := context.Background()
	const n, size, large = 20, 2048, 200 << 10
	for i := range n {
		data := storetest.Data(uint64(i), size)
		if _, err := s.Put(ctx, "default", storetest.KeyOf(fmt.Sprint(i)), bytes.NewReader(data), store.PutOptions{Size: size}); err != nil {
			t.Fatal(err)
		}
	}
	big := storetest.Data(99, large)
	if _, err := s.Put(ctx, "default", storetest.KeyOf("big"), bytes.NewReader(big), store.PutOptions{Size: large}); err != nil {
		t.Fatal(err)
	}
	payload := int64(n*size + large)
	check := func(when string, entries int64) store.Usage {
		t.Helper()
		u := s.Usage()
		small := entries - 1
		lo, hi := small*size*4/3+large, small*(size*4/3+2048)+large+2048
		t.Logf("%s: %+v (payload %d)", when, u, payload)
		if u.Entries != entries || u.Bytes < lo || u.Bytes > hi {
			t.Fatalf("%s: Usage = %+v, want %d entries and between %d and %d bytes", when, u, entries, lo, hi)
		}
		return u
	}
	written := check("after this process's Puts", n+1)
	if err := s.ScanUsage(ctx); err != nil {
		t.Fatal(err)
	}
	listed := check("after a listing", n+1)
	if written.Bytes != listed.Bytes {
		t.Errorf("the Puts counted %d bytes, the listing %d", written.Bytes, listed.Bytes)
	}
	if err := s.Delete(ctx, "default", storetest.KeyOf("0")); err != nil {
		t.Fatal(err)
	}
	deleted := check("after a Delete", n)
	if err := s.ScanUsage(ctx); err != nil {
		t.Fatal(err)
	}
	if relisted := check("after a listing again", n); relisted.Bytes != deleted.Bytes {
		t.Errorf("the Delete left %d bytes counted, the listing %d", deleted.Bytes, relisted.Bytes)
	}
}
