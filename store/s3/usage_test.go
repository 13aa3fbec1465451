package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3"
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

// TestUsageUncountedUntilListed: until a listing of the bucket has
// finished, Usage's counts are this process's own writes, no count of the
// bucket, and it says so (Uncounted: the first listing pending, running
// for how long while a hung server holds it, or failing with its error);
// the first listing to finish makes them counts, with ListedAt. Before,
// nothing told 0 bytes in 0 entries not counted from an empty bucket.
func TestUsageUncountedUntilListed(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	s, err := s3.Open(context.Background(), config(srv, bucket)) // UsageInterval -1: lists on ScanUsage only
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Put(ctx, "default", storetest.KeyOf("a"), bytes.NewReader([]byte("hello")), store.PutOptions{Size: 5}); err != nil {
		t.Fatal(err)
	}
	type state struct {
		when, uncounted string
		listed          bool
	}
	check := func(tt state) {
		t.Helper()
		u := s.Usage()
		if !strings.HasPrefix(u.Uncounted, tt.uncounted) || (tt.uncounted == "") != (u.Uncounted == "") || u.ListedAt.IsZero() == tt.listed {
			t.Errorf("%s: Uncounted %q, ListedAt %v; want Uncounted %q, listed: %v", tt.when, u.Uncounted, u.ListedAt, tt.uncounted, tt.listed)
		}
	}
	check(state{"before any listing", "first listing of the bucket pending", false})

	// The server hangs: the listing waits (Usage says for how long), then
	// ends at the caller's deadline, and its error is the reason.
	srv.Pause(t)
	listCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	done := make(chan error, 1)
	go func() { done <- s.ScanUsage(listCtx) }()
	for !strings.Contains(s.Usage().Uncounted, "running for") {
		select {
		case err := <-done:
			t.Fatalf("a listing of a paused server ended (%v) before Usage said it was running", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	check(state{"while the listing hangs", "first listing of the bucket pending, running for ", false})
	err = <-done
	cancel()
	srv.Resume(t)
	if err == nil {
		t.Fatal("a listing of a paused server succeeded")
	}
	check(state{"after the listing failed", "first listing of the bucket failing: list entries s3://" + bucket + "/cache/entries/", false})

	if err := s.ScanUsage(ctx); err != nil {
		t.Fatal(err)
	}
	check(state{"after a listing", "", true})
	if u := s.Usage(); u.Entries != 1 {
		t.Errorf("after a listing: %d entries, want 1", u.Entries)
	}
	// A later listing that fails leaves the last counts, and says when
	// they were listed.
	listed := s.Usage().ListedAt
	srv.Pause(t)
	listCtx, cancel = context.WithTimeout(ctx, time.Second)
	err = s.ScanUsage(listCtx)
	cancel()
	srv.Resume(t)
	if err == nil {
		t.Fatal("a listing of a paused server succeeded")
	}
	check(state{"after a later listing failed", "", true})
	if u := s.Usage(); !u.ListedAt.Equal(listed) {
		t.Errorf("a failed listing moved ListedAt from %v to %v", listed, u.ListedAt)
	}
}

// TestUsageFirstListingRetried: a replica whose first listing of the bucket
// fails (started during an outage of the bucket) tries again after
// UsageRetry, not the whole UsageInterval (10 minutes by default), so its
// shared tier is not "not counted yet" for 10 minutes after a short outage.
func TestUsageFirstListingRetried(t *testing.T) {
	srv := s3test.Start(t)
	stuck := stuckListener(t)
	var hung atomic.Bool
	hung.Store(true)
	var dialer net.Dialer
	cfg := config(srv, srv.NewBucket(t))
	cfg.UsageInterval, cfg.UsageRetry = time.Hour, 100*time.Millisecond
	cfg.Transport = &http.Transport{
		ResponseHeaderTimeout: 500 * time.Millisecond,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if hung.Load() {
				addr = stuck
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}
	s, err := s3.Open(context.Background(), cfg) // the bucket hangs: Open serves on, the listing fails
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for !strings.Contains(s.Usage().Uncounted, "failing") {
		time.Sleep(10 * time.Millisecond)
	}
	hung.Store(false)
	deadline := time.Now().Add(30 * time.Second) // a bound on the test, not a timing assertion
	for s.Usage().Uncounted != "" {
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the bucket answered again, Usage still says %q: the failed first listing was not retried before UsageInterval (1h)", s.Usage().Uncounted)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUsageListingCancelledBetweenPages: minio-go ends a listing whose
// context ends between two pages without an error, and ScanUsage took it
// for a finished listing: a replica closing (or a caller's deadline) while
// it listed blobs/ (its second listing; a short first one was caught by the
// second's check of ctx at its start) saved a partial count as the
// bucket's usage, with a new ListedAt. Now the listing fails and the last
// counts stand. The listing is cancelled at the last objects of its first
// page (S3 pages hold 1,000 keys), where minio-go either reports the cancel
// or ends silently, by chance: before the fix about half the attempts
// ended silently.
func TestUsageListingCancelledBetweenPages(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	cfg := config(srv, bucket)
	const n = 1100 // two pages
	srv.FillBucket(t, bucket, n, func(i int) string { return fmt.Sprintf("%s/blobs/%064x", cfg.Prefix, i) })
	s := open(t, cfg) // lists the bucket once
	defer s.Close()
	before := s.Usage()
	if before.Blobs != n || before.ListedAt.IsZero() {
		t.Fatalf("after the first listing: %+v, want %d blobs and ListedAt", before, n)
	}
	for i := range 30 {
		cut := 997 + i%3
		ctx, cancel := context.WithCancel(context.Background())
		listed := 0
		s3.OnListed(s, func(key string) {
			if !strings.Contains(key, "/blobs/") {
				return
			}
			if listed++; listed == cut {
				cancel()
			}
		})
		err := s.ScanUsage(ctx)
		cancel()
		if u := s.Usage(); u.Blobs != before.Blobs || u.Bytes != before.Bytes || !u.ListedAt.Equal(before.ListedAt) {
			t.Errorf("ScanUsage cancelled at object %d of %d changed Usage from %+v to %+v", cut, n, before, u)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("ScanUsage cancelled at object %d of %d: err = %v, want context.Canceled", cut, n, err)
		}
	}
}

// TestUsageListInterval: Usage says how often the bucket is listed
// (UsageInterval), for the stats to print the real interval where they
// printed "every 10 minutes" whatever it was; 0 when listing is off.
func TestUsageListInterval(t *testing.T) {
	srv := s3test.Start(t)
	for _, tc := range []struct {
		interval time.Duration
		want     float64
	}{
		{7 * time.Minute, 420},
		{-1, 0},
	} {
		cfg := config(srv, srv.NewBucket(t))
		cfg.UsageInterval = tc.interval
		s, err := s3.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Usage().ListInterval; got != tc.want {
			t.Errorf("UsageInterval %s: ListInterval %v, want %v", tc.interval, got, tc.want)
		}
		s.Close()
	}
}
