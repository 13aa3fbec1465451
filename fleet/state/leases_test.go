package state

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/lease"
)

func key(b byte) cachekey.Key { var k cachekey.Key; k[0] = b; return k }

// TestLeaseContract checks the compare-and-swap contract of lease.Shared
// on the real server, step by step.
func TestLeaseContract(t *testing.T) {
	c, _ := bucket(t)
	l := c.Leases()
	k := key(1)
	exp := time.Now().Add(time.Minute).Round(0)
	if _, _, err := l.Load(ctx, "ns", k); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("load of nothing: %v, want ErrNotHeld", err)
	}
	v1, err := l.Create(ctx, "ns", k, lease.Lease{Holder: "a", Expires: exp})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		do   func() error
		want error
	}{
		{"second create", func() error { _, err := l.Create(ctx, "ns", k, lease.Lease{Holder: "b", Expires: exp}); return err }, lease.ErrChanged},
		{"replace on a stale etag", func() error {
			_, err := l.Replace(ctx, "ns", k, "0123456789abcdef", lease.Lease{Holder: "b"})
			return err
		}, lease.ErrChanged},
		{"delete on a stale etag", func() error { return l.Delete(ctx, "ns", k, "0123456789abcdef") }, lease.ErrChanged},
		{"replace same holder and expiry", func() error {
			v2, err := l.Replace(ctx, "ns", k, v1, lease.Lease{Holder: "a", Expires: exp})
			if err != nil {
				return err
			}
			if v2 == v1 {
				return errors.New("a rewrite kept its etag")
			}
			if _, err := l.Replace(ctx, "ns", k, v1, lease.Lease{Holder: "a", Expires: exp}); !errors.Is(err, lease.ErrChanged) {
				return fmt.Errorf("replace on the superseded etag: %v", err)
			}
			v1 = v2
			return nil
		}, nil},
		{"delete on the current etag", func() error { return l.Delete(ctx, "ns", k, v1) }, nil},
		{"delete of nothing", func() error { return l.Delete(ctx, "ns", k, v1) }, nil},
		{"replace of nothing", func() error { _, err := l.Replace(ctx, "ns", k, v1, lease.Lease{Holder: "a"}); return err }, lease.ErrChanged},
	}
	for _, s := range steps {
		if err := s.do(); !errors.Is(err, s.want) {
			t.Fatalf("%s: err = %v, want %v", s.name, err, s.want)
		}
	}
}

// tables returns n lease tables, each on its own client of one bucket: n
// replicas of a fleet.
func tables(t *testing.T, n int, cfg lease.Config) ([]*lease.Table, *Client) {
	c, srv := bucket(t)
	var ts []*lease.Table
	for range n {
		cfg.Shared = client(t, srv, c.Bucket()).Leases()
		tb := lease.New(cfg)
		t.Cleanup(tb.Close)
		ts = append(ts, tb)
	}
	return ts, c
}

func TestFleetOneCompile(t *testing.T) {
	ts, _ := tables(t, 3, lease.Config{})
	for round := range 3 { // a few keys: the race is the point
		k := key(byte(10 + round))
		var granted, local atomic.Int32
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				l, ok, err := ts[i%3].Acquire(ctx, "ns", k, fmt.Sprintf("host-%d:1", i), time.Minute)
				if err != nil {
					t.Error(err)
				}
				if ok {
					granted.Add(1)
				}
				if l.Local {
					local.Add(1)
				}
			})
		}
		wg.Wait()
		if g, l := granted.Load(), local.Load(); g != 1 || l != 0 {
			t.Fatalf("round %d: %d of 16 acquirers on 3 replicas granted (%d locally), want exactly 1 shared", round, g, l)
		}
	}
}

func TestFleetTakeover(t *testing.T) {
	clk := &clock{t: time.Now()}
	ts, _ := tables(t, 3, lease.Config{Now: clk.Now, SkewMargin: time.Second})
	k := key(2)
	if _, ok, err := ts[0].Acquire(ctx, "ns", k, "crashed", 5*time.Second); !ok || err != nil {
		t.Fatalf("first acquire: %v %v", ok, err)
	}
	clk.Add(5*time.Second + 500*time.Millisecond) // expired, but within the margin
	if _, ok, _ := ts[1].Acquire(ctx, "ns", k, "early", time.Minute); ok {
		t.Fatal("taken over within the skew margin")
	}
	clk.Add(time.Second)
	var granted atomic.Int32
	var winner atomic.Value
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			h := fmt.Sprintf("next-%d", i)
			if _, ok, err := ts[i%3].Acquire(ctx, "ns", k, h, time.Minute); ok && err == nil {
				granted.Add(1)
				winner.Store(h)
			}
		})
	}
	wg.Wait()
	if n := granted.Load(); n != 1 {
		t.Fatalf("%d replicas took over the expired lease, want 1", n)
	}
	for i, tb := range ts {
		if l, held := tb.Holder(ctx, "ns", k); !held || l.Holder != winner.Load() {
			t.Fatalf("table %d sees %+v held=%v, want %v", i, l, held, winner.Load())
		}
	}
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestFleetEndsVisible ends a lease on one replica and checks that another
// replica's waiter wakes within about a second (the table's own poll) and
// that a third sees the lease gone.
func TestFleetEndsVisible(t *testing.T) {
	tests := []struct {
		name string
		end  func(tb *lease.Table, k cachekey.Key) error
	}{
		{"written", func(tb *lease.Table, k cachekey.Key) error { tb.Written(ctx, "ns", k); return nil }},
		{"released", func(tb *lease.Table, k cachekey.Key) error { _, err := tb.Release(ctx, "ns", k, "a"); return err }},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, _ := tables(t, 3, lease.Config{PollInterval: 200 * time.Millisecond})
			k := key(byte(20 + i))
			if _, ok, err := ts[0].Acquire(ctx, "ns", k, "a", time.Minute); !ok || err != nil {
				t.Fatalf("acquire: %v %v", ok, err)
			}
			w, l, ok, err := ts[1].Wait(ctx, "ns", k)
			if !ok || err != nil || l.Holder != "a" {
				t.Fatalf("wait on replica 1: ok=%v err=%v lease=%+v", ok, err, l)
			}
			defer ts[1].Cancel(w)
			start := time.Now()
			if err := tt.end(ts[2], k); err != nil {
				t.Fatal(err)
			}
			select {
			case <-w.C():
			case <-time.After(1500 * time.Millisecond):
				t.Fatal("waiter on replica 1 not woken within 1.5 s")
			}
			t.Logf("woken after %v: %v", time.Since(start), w.Outcome())
			if w.Outcome() != lease.Released {
				t.Fatalf("outcome %v, want released", w.Outcome())
			}
			if _, held := ts[0].Holder(ctx, "ns", k); held {
				t.Fatal("replica 0 still sees the lease")
			}
			if _, ok, _ := ts[0].Acquire(ctx, "ns", k, "b", time.Minute); !ok {
				t.Fatal("ended lease not acquirable")
			}
		})
	}
}

// TestFleetS3Down stops the server: every call fails open, within the
// shared timeout, and leases are shared again once it is back.
func TestFleetS3Down(t *testing.T) {
	c, srv := bucket(t)
	var ts []*lease.Table
	for range 2 {
		tb := lease.New(lease.Config{Shared: client(t, srv, c.Bucket()).Leases(), SharedTimeout: time.Second})
		t.Cleanup(tb.Close)
		ts = append(ts, tb)
	}
	k := key(30)
	if _, ok, _ := ts[0].Acquire(ctx, "ns", k, "before", time.Minute); !ok {
		t.Fatal("not granted")
	}
	srv.Stop()
	start := time.Now()
	l, ok, err := ts[1].Acquire(ctx, "ns", k, "during", time.Minute)
	if err != nil || !ok || !l.Local {
		t.Fatalf("acquire with S3 down: ok=%v local=%v err=%v; want a local grant", ok, l.Local, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("failing open took %v", d)
	}
	if _, _, ok, err := ts[1].Wait(ctx, "ns", key(31)); ok || err != nil {
		t.Fatalf("wait with S3 down: ok=%v err=%v", ok, err)
	}
	ts[0].Written(ctx, "ns", k) // logged, not blocking for long
	if _, err := ts[1].Release(ctx, "ns", k, "during"); err != nil {
		t.Fatalf("release with S3 down: %v", err)
	}
	if ts[1].SharedFaults() == 0 {
		t.Fatal("faults not counted")
	}
	srv.Restart(t)
	if _, ok, _ := ts[1].Acquire(ctx, "ns", key(32), "after", time.Minute); !ok {
		t.Fatal("not granted after recovery")
	}
	if l, ok, _ := ts[0].Acquire(ctx, "ns", key(32), "other", time.Minute); ok || l.Holder != "after" {
		t.Fatalf("after recovery the lease is not shared: ok=%v holder=%q", ok, l.Holder)
	}
}

// TestFleetLeaseOfNewerFormatKept: a lease record of a newer format than
// this build writes, whose expiry it cannot read (a newer replica's, in a
// rolling upgrade), is neither read as lapsed nor taken over: this replica
// fails open (a local grant) and leaves the record to the replicas that
// read it. It used to replace it, taking a live lease from the newer
// replica's compile.
func TestFleetLeaseOfNewerFormatKept(t *testing.T) {
	ts, c := tables(t, 1, lease.Config{SharedTimeout: time.Second})
	k := key(40)
	name := c.Leases().name("ns", k)
	newer := `{"v":2,"holder":"newer-host:1","expires_unix_ms":` + fmt.Sprint(time.Now().Add(time.Hour).UnixMilli()) + `,"nonce":"n"}`
	if _, err := c.core.PutObject(ctx, c.cfg.Bucket, name, strings.NewReader(newer), int64(len(newer)), "", "", minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	l, ok, err := ts[0].Acquire(ctx, "ns", k, "older-host:1", time.Minute)
	if err != nil || !ok || !l.Local {
		t.Errorf("acquire over a newer lease record: ok=%v local=%v err=%v; want a local grant (fail open)", ok, l.Local, err)
	}
	rc, _, _, err := c.core.GetObject(ctx, c.cfg.Bucket, name, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != newer {
		t.Errorf("lease record after an older replica's acquire: %s; want the newer replica's kept: %s", got, newer)
	}
}
