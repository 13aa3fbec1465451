package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/stats/statstest"
)

// compileOrWait is what a trainer does on a miss: take the lease and compile,
// or wait for the holder's entry; if the wait ends empty, try again.
func compileOrWait(ctx context.Context, c *client.Client, key, holder string, ttl time.Duration, compile func() []byte, wait time.Duration) (body []byte, compiled bool, err error) {
	for attempt := 0; attempt < 5; attempt++ {
		_, granted, err := c.AcquireLease(ctx, "default", key, holder, ttl)
		if err != nil {
			return nil, false, err
		}
		if granted {
			b := compile()
			if b == nil { // the holder "died" without writing
				return nil, true, nil
			}
			if _, err := c.Put(ctx, "default", key, bytes.NewReader(b), client.PutOptions{Size: int64(len(b))}); err != nil {
				return nil, true, err
			}
			return b, true, nil
		}
		resp, err := c.Get(ctx, "default", key, wait)
		if client.IsNotFound(err) {
			continue // the lease ended without the entry: try to take it
		}
		if err != nil {
			return nil, false, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return b, false, err
	}
	return nil, false, fmt.Errorf("%s: gave up", holder)
}

// TestLeaseSixteenClients: 16 clients miss the same key at once; exactly one
// compiles (2 s), the other 15 get its entry from their long-poll, woken by
// the PUT.
func TestLeaseSixteenClients(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	c := newClient(t, srv.URL, "")
	key := testKey(42)
	want := bytes.Repeat([]byte("executable"), 10_000)
	var compiles atomic.Int32
	var putDone atomic.Int64 // unix nanos when the holder's PUT returned
	var start sync.WaitGroup
	start.Add(1)
	type result struct {
		body     []byte
		compiled bool
		err      error
		at       time.Time
	}
	results := make([]result, 16)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			start.Wait()
			b, compiled, err := compileOrWait(context.Background(), c, key, fmt.Sprintf("client-%d", i), 30*time.Second, func() []byte {
				compiles.Add(1)
				time.Sleep(2 * time.Second) // simulated compile
				return want
			}, 60*time.Second)
			if compiled {
				putDone.Store(time.Now().UnixNano())
			}
			results[i] = result{b, compiled, err, time.Now()}
		}(i)
	}
	t0 := time.Now()
	start.Done()
	wg.Wait()
	if n := compiles.Load(); n != 1 {
		t.Fatalf("%d clients compiled, want exactly 1", n)
	}
	put := time.Unix(0, putDone.Load())
	var maxLag time.Duration
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("client %d: %v", i, r.err)
		}
		if !bytes.Equal(r.body, want) {
			t.Fatalf("client %d got %d wrong bytes", i, len(r.body))
		}
		if r.compiled {
			continue
		}
		// Woken by the PUT: not before the compile finished, long before
		// the 60 s long-poll would have timed out.
		if r.at.Sub(t0) < 2*time.Second || r.at.Sub(t0) > 30*time.Second {
			t.Errorf("client %d returned %s after start: not woken by the PUT", i, r.at.Sub(t0))
		}
		if lag := r.at.Sub(put); lag > maxLag {
			maxLag = lag
		}
	}
	t.Logf("1 compile; 15 waiters received the entry at most %s after the holder's PUT returned", maxLag)
	if held, waiting := srv.API.LeaseCounts(); held != 0 || waiting != 0 {
		t.Errorf("after: %d leases held, %d waiters", held, waiting)
	}
}

// TestLeaseHolderDies: the holder never writes; after its lease expires a
// waiter takes over and compiles.
func TestLeaseHolderDies(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	c := newClient(t, srv.URL, "")
	ctx := context.Background()
	key := testKey(43)
	if _, ok, err := c.AcquireLease(ctx, "default", key, "doomed", 1*time.Second); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	// The holder dies here: no PUT, no DELETE.
	want := []byte("compiled by the survivor")
	var compiles atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			b, _, err := compileOrWait(ctx, c, key, fmt.Sprintf("waiter-%d", i), 10*time.Second, func() []byte {
				compiles.Add(1)
				time.Sleep(300 * time.Millisecond)
				return want
			}, 60*time.Second)
			if err == nil && !bytes.Equal(b, want) {
				err = fmt.Errorf("waiter %d got %q", i, b)
			}
			errs <- err
		}(i)
	}
	t0 := time.Now()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := compiles.Load(); n != 1 {
		t.Fatalf("%d waiters compiled after the holder died, want 1", n)
	}
	t.Logf("takeover and delivery took %s (lease ttl 1s)", time.Since(t0))
}

// TestLeaseReleaseWakesWaiters: DELETE by the holder ends waits with 404 at
// once.
func TestLeaseReleaseWakesWaiters(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	c := newClient(t, srv.URL, "")
	ctx := context.Background()
	key := testKey(44)
	if _, ok, err := c.AcquireLease(ctx, "default", key, "h", time.Minute); err != nil || !ok {
		t.Fatal(ok, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, "default", key, 60*time.Second)
		done <- err
	}()
	for {
		if _, w := srv.API.LeaseCounts(); w == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.ReleaseLease(ctx, "default", key, "h"); err != nil {
		t.Fatal(err)
	}
	err := <-done
	var ce *client.Error
	if !client.IsNotFound(err) || !asError(err, &ce) || ce.Code != "not_found" {
		t.Fatalf("waiter got %v, want 404 not_found", err)
	}
	t.Log(ce.Message)
}

func asError(err error, target **client.Error) bool {
	e, ok := err.(*client.Error)
	if ok {
		*target = e
	}
	return ok
}

// TestShutdownEndsLongPolls: a GET ?wait= parked behind a lease ends at once
// with 503 when the server shuts down, instead of holding the shutdown.
func TestShutdownEndsLongPolls(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	c := newClient(t, srv.URL, "")
	ctx := context.Background()
	key := testKey(45)
	if _, ok, err := c.AcquireLease(ctx, "default", key, "h", time.Minute); err != nil || !ok {
		t.Fatal(ok, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, "default", key, 300*time.Second)
		done <- err
	}()
	for {
		if _, w := srv.API.LeaseCounts(); w == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	t0 := time.Now()
	srv.Close()
	err := <-done
	var ce *client.Error
	if !asError(err, &ce) || ce.Status != 503 || ce.Code != "shutting_down" {
		t.Fatalf("waiter got %v, want 503 shutting_down", err)
	}
	if d := time.Since(t0); d > 30*time.Second {
		t.Errorf("shutdown with a parked long poll took %s", d)
	}
}

// TestLeaseWaitHitAnswersItsMiss: a trainer that misses, finds the compile
// lease held and gets the entry from GET ?wait= ran no compile. Its run and
// the totals count that hit in wait_hits, so misses-wait_hits is the
// compiles run (0 for the waiter); a later GET without ?wait= is a plain
// hit.
func TestLeaseWaitHitAnswersItsMiss(t *testing.T) {
	srv := statstest.Start(t, nil)
	holder := newClient(t, srv.URL, "sweep:holder")
	waiter := newClient(t, srv.URL, "sweep:waiter")
	ctx := context.Background()
	key := testKey(45)
	if _, err := waiter.Get(ctx, "default", key, 0); !client.IsNotFound(err) {
		t.Fatalf("first lookup: %v, want a 404 miss", err)
	}
	if _, ok, err := holder.AcquireLease(ctx, "default", key, "holder", time.Minute); err != nil || !ok {
		t.Fatalf("holder's acquire: granted %v, %v", ok, err)
	}
	if _, ok, err := waiter.AcquireLease(ctx, "default", key, "waiter", time.Minute); err != nil || ok {
		t.Fatalf("waiter's acquire: granted %v, %v; want refused", ok, err)
	}
	got := make(chan error, 1)
	go func() {
		resp, err := waiter.Get(ctx, "default", key, time.Minute)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		got <- err
	}()
	for {
		if _, w := srv.API.LeaseCounts(); w == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	putEntry(t, holder, "default", key, []byte("executable"), "prog")
	if err := <-got; err != nil {
		t.Fatalf("waiter's GET ?wait=: %v", err)
	}
	resp, err := waiter.Get(ctx, "default", key, 0)
	if err != nil {
		t.Fatalf("later lookup: %v", err)
	}
	resp.Body.Close()

	check := func(when string) {
		s := getStats(t, srv.URL+"/v1/stats")
		want := [4]int64{3, 2, 1, 1} // lookups, hits, misses, wait hits
		if tt := s.Totals; [4]int64{tt.Lookups, tt.Hits, tt.Misses, tt.WaitHits} != want {
			t.Errorf("%s: totals: lookups, hits, misses, wait hits = %d %d %d %d; want %v", when, tt.Lookups, tt.Hits, tt.Misses, tt.WaitHits, want)
		}
		found := false
		for _, r := range s.Runs {
			if r.Run != "sweep:waiter" {
				continue
			}
			found = true
			if [4]int64{r.Lookups, r.Hits, r.Misses, r.WaitHits} != want {
				t.Errorf("%s: waiter's run: lookups, hits, misses, wait hits = %d %d %d %d; want %v", when, r.Lookups, r.Hits, r.Misses, r.WaitHits, want)
			}
		}
		if !found {
			t.Errorf("%s: no run sweep:waiter in %+v", when, s.Runs)
		}
		// /metrics says the same, so that misses - wait hits is the
		// compiles run there too.
		m := metricSums(t, srv.URL, "cachesvc_lookups_total", "cachesvc_lease_wait_hits_total")
		if got := [2]float64{m[`cachesvc_lookups_total{result="miss"}`], m["cachesvc_lease_wait_hits_total"]}; got != [2]float64{1, 1} {
			t.Errorf("%s: /metrics: misses, wait hits = %v; want 1 1 as in /v1/stats", when, got)
		}
	}
	check("live")
	srv.Restart()
	check("after a restart")
}

// metricSums scrapes base's /metrics and sums the samples of each named
// family over its labels, and also per result label for
// cachesvc_lookups_total-style families (key `name{result="hit"}`).
func metricSums(t *testing.T, base string, names ...string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		for _, n := range names {
			rest, ok := strings.CutPrefix(line, n)
			if !ok || (rest[0] != '{' && rest[0] != ' ') {
				continue
			}
			var v float64
			if _, err := fmt.Sscan(rest[strings.LastIndexByte(rest, ' ')+1:], &v); err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			out[n] += v
			for _, r := range []string{"hit", "miss"} {
				if strings.Contains(rest, `result="`+r+`"`) {
					out[n+`{result="`+r+`"}`] += v
				}
			}
		}
	}
	return out
}

// TestLeaseRenewedSaysSo: a second POST by the same holder (another thread of
// one process) is a renewal, and the answer says so, so that the second
// asker waits for the entry instead of compiling it twice (the Go client's
// AcquireLease: not granted; its RenewLease, for the thread that took it:
// granted).
func TestLeaseRenewedSaysSo(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	c := newClient(t, srv.URL, "")
	ctx := context.Background()
	key := testKey(47)
	steps := []struct {
		holder           string
		renew            bool // RenewLease, else AcquireLease
		granted, renewed bool
	}{
		{"host:1", false, true, false},
		{"host:1", false, false, true},
		{"host:1", true, true, true},
		{"host:2", false, false, false},
	}
	for i, s := range steps {
		post := c.AcquireLease
		if s.renew {
			post = c.RenewLease
		}
		l, granted, err := post(ctx, "default", key, s.holder, 30*time.Second)
		if err != nil || granted != s.granted || l.Renewed != s.renewed {
			t.Fatalf("ask %d by %s: granted=%v renewed=%v err=%v, want %v %v", i, s.holder, granted, l.Renewed, err, s.granted, s.renewed)
		}
	}
}

// TestLeaseWaitHitSavesOnlyUnwaitedTime: a waiter parked behind a lease
// while the holder compiled; its hit saved the entry's compile seconds
// minus the time it waited (at least the 300 ms it surely parked), never
// less than zero, while a plain hit saves them all.
func TestLeaseWaitHitSavesOnlyUnwaitedTime(t *testing.T) {
	tests := []struct {
		name    string
		compile float64
		// most is the most the waiter's hit may have saved.
		most float64
	}{
		{"long compile", 100, 99.7},
		{"compile shorter than the wait", 0.2, 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := statstest.Start(t, nil)
			c := newClient(t, srv.URL, "")
			ctx := context.Background()
			key := testKey(50 + i)
			if _, ok, err := c.AcquireLease(ctx, "default", key, "holder", time.Minute); err != nil || !ok {
				t.Fatalf("acquire: granted %v, %v", ok, err)
			}
			got := make(chan error, 1)
			go func() {
				resp, err := c.Get(ctx, "default", key, time.Minute)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				got <- err
			}()
			for {
				if _, w := srv.API.LeaseCounts(); w == 1 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond) // the holder compiles; the waiter waits
			body := []byte("executable")
			if _, err := c.Put(ctx, "default", key, bytes.NewReader(body), client.PutOptions{Size: int64(len(body)), CompileSeconds: tt.compile}); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("GET ?wait=: %v", err)
			}
			saved := getStats(t, srv.URL+"/v1/stats").Totals.CompileSecondsSaved
			if saved < 0 || saved > tt.most {
				t.Fatalf("the wait hit saved %v s of a %v s compile, want 0 to %v", saved, tt.compile, tt.most)
			}
			resp, err := c.Get(ctx, "default", key, 0) // a plain hit saves it all
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if after := getStats(t, srv.URL+"/v1/stats").Totals.CompileSecondsSaved; math.Abs(after-saved-tt.compile) > 1e-6 {
				t.Fatalf("a plain hit added %v s, want %v", after-saved, tt.compile)
			}
		})
	}
}
