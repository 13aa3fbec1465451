package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
)

// memShared is an in-memory Shared with the compare-and-swap contract, for
// the table's policy tests (fleet/state runs the same scenarios on S3).
type memShared struct {
	mu   sync.Mutex
	recs map[slotID]memRec
	seq  int
	down atomic.Bool
}

type memRec struct {
	l   Lease
	ver string
}

var errDown = errors.New("backend down")

func newMemShared() *memShared { return &memShared{recs: make(map[slotID]memRec)} }

func (m *memShared) Load(_ context.Context, ns string, key cachekey.Key) (Lease, string, error) {
	if m.down.Load() {
		return Lease{}, "", errDown
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[slotID{ns, key}]
	if !ok {
		return Lease{}, "", ErrNotHeld
	}
	return r.l, r.ver, nil
}

func (m *memShared) put(id slotID, l Lease) string {
	m.seq++
	v := fmt.Sprint(m.seq)
	m.recs[id] = memRec{l: Lease{Holder: l.Holder, Expires: l.Expires}, ver: v}
	return v
}

func (m *memShared) Create(_ context.Context, ns string, key cachekey.Key, l Lease) (string, error) {
	if m.down.Load() {
		return "", errDown
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.recs[slotID{ns, key}]; ok {
		return "", ErrChanged
	}
	return m.put(slotID{ns, key}, l), nil
}

func (m *memShared) Replace(_ context.Context, ns string, key cachekey.Key, ver string, l Lease) (string, error) {
	if m.down.Load() {
		return "", errDown
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.recs[slotID{ns, key}]; !ok || r.ver != ver {
		return "", ErrChanged
	}
	return m.put(slotID{ns, key}, l), nil
}

func (m *memShared) Delete(_ context.Context, ns string, key cachekey.Key, ver string) error {
	if m.down.Load() {
		return errDown
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[slotID{ns, key}]
	if ok && r.ver != ver {
		return ErrChanged
	}
	delete(m.recs, slotID{ns, key})
	return nil
}

var _ Shared = (*memShared)(nil)

// fleet returns n tables on one backend and one clock.
func fleet(t *testing.T, n int, sh Shared, clk *clock) []*Table {
	var ts []*Table
	for range n {
		tb := New(Config{Shared: sh, Now: clk.Now, SkewMargin: time.Second, PollInterval: time.Hour})
		t.Cleanup(tb.Close)
		ts = append(ts, tb)
	}
	return ts
}

func TestSharedOneGrant(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	ts := fleet(t, 3, newMemShared(), clk)
	var granted atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			_, ok, err := ts[i%3].Acquire(ctx, "ns", key(1), fmt.Sprint("host-", i), time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				granted.Add(1)
			}
		})
	}
	wg.Wait()
	if n := granted.Load(); n != 1 {
		t.Fatalf("%d of 16 acquirers granted, want 1", n)
	}
}

func TestSharedSteps(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	sh := newMemShared()
	ts := fleet(t, 2, sh, clk)
	k := key(2)
	steps := []struct {
		name    string
		advance time.Duration
		table   int
		holder  string
		granted bool
		holds   string
		renewed bool
	}{
		{"a on table 0", 0, 0, "a", true, "a", false},
		{"b on table 1 refused", time.Second, 1, "b", false, "a", false},
		{"a renews on table 1", time.Second, 1, "a", true, "a", true},
		{"past expiry, within the skew margin", 10*time.Second + 500*time.Millisecond, 1, "b", false, "a", false},
		{"past the margin: b takes over", time.Second, 1, "b", true, "b", false},
		{"a refused on table 0", 0, 0, "a", false, "b", false},
		{"b renews on table 0", 0, 0, "b", true, "b", true},
	}
	for _, s := range steps {
		clk.Add(s.advance)
		l, ok, err := ts[s.table].Acquire(ctx, "ns", k, s.holder, 10*time.Second)
		if err != nil || ok != s.granted || l.Holder != s.holds || l.Local || l.Renewed != s.renewed {
			t.Fatalf("%s: granted=%v holder=%q local=%v renewed=%v err=%v; want %v %q %v", s.name, ok, l.Holder, l.Local, l.Renewed, err, s.granted, s.holds, s.renewed)
		}
	}
	if _, err := ts[0].Release(ctx, "ns", k, "a"); !errors.Is(err, ErrHeldByOther) {
		t.Fatalf("release by a: %v, want ErrHeldByOther", err)
	}
	if _, err := ts[0].Release(ctx, "ns", k, "b"); err != nil {
		t.Fatalf("release by b through the other table: %v", err)
	}
	if _, held := ts[1].Holder(ctx, "ns", k); held {
		t.Fatal("released lease still visible on table 1")
	}
}

func TestSharedWakesRemoteWaiters(t *testing.T) {
	tests := []struct {
		name string
		end  func(tb *Table, k cachekey.Key) error
	}{
		{"written elsewhere", func(tb *Table, k cachekey.Key) error { tb.Written(ctx, "ns", k); return nil }},
		{"released elsewhere", func(tb *Table, k cachekey.Key) error { _, err := tb.Release(ctx, "ns", k, "a"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{t: time.Unix(1000, 0)}
			ts := fleet(t, 3, newMemShared(), clk)
			k := key(3)
			if _, ok, _ := ts[0].Acquire(ctx, "ns", k, "a", time.Minute); !ok {
				t.Fatal("not granted")
			}
			w, l, ok, err := ts[1].Wait(ctx, "ns", k)
			if err != nil || !ok || l.Holder != "a" {
				t.Fatalf("wait on table 1: ok=%v err=%v lease=%+v", ok, err, l)
			}
			lw, _, ok, _ := ts[0].Wait(ctx, "ns", k)
			if !ok {
				t.Fatal("local wait did not park")
			}
			if err := tt.end(ts[2], k); err != nil {
				t.Fatal(err)
			}
			ts[1].Poll(ctx)
			ts[0].Poll(ctx)
			for i, w := range []*Waiter{w, lw} {
				select {
				case <-w.C():
				default:
					t.Fatalf("waiter %d not woken by the poll", i)
				}
				if w.Outcome() != Released {
					t.Fatalf("waiter %d outcome %v, want released", i, w.Outcome())
				}
			}
			if _, waiting := ts[1].Counts(); waiting != 0 {
				t.Fatalf("waiting = %d", waiting)
			}
		})
	}
}

func TestSharedFailOpen(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	sh := newMemShared()
	ts := fleet(t, 2, sh, clk)
	k := key(4)
	sh.down.Store(true)
	l, ok, err := ts[0].Acquire(ctx, "ns", k, "a", time.Minute)
	if err != nil || !ok || !l.Local {
		t.Fatalf("acquire with the backend down: ok=%v local=%v err=%v; want a local grant", ok, l.Local, err)
	}
	// The replica alone still collapses its own callers.
	if l, ok, _ := ts[0].Acquire(ctx, "ns", k, "b", time.Minute); ok || l.Holder != "a" {
		t.Fatalf("second local acquirer: ok=%v holder=%q", ok, l.Holder)
	}
	if _, ok, _ := ts[1].Acquire(ctx, "ns", k, "c", time.Minute); !ok {
		t.Fatal("another replica must fail open too")
	}
	if _, _, ok, err := ts[1].Wait(ctx, "ns", key(9)); ok || err != nil {
		t.Fatalf("wait with the backend down: ok=%v err=%v", ok, err)
	}
	if _, err := ts[0].Release(ctx, "ns", k, "a"); err != nil {
		t.Fatalf("release with the backend down: %v", err)
	}
	if ts[0].SharedFaults() == 0 {
		t.Fatal("faults not counted")
	}
	sh.down.Store(false)
	if l, ok, _ := ts[0].Acquire(ctx, "ns", k, "a", time.Minute); !ok || l.Local {
		t.Fatalf("after recovery: ok=%v local=%v", ok, l.Local)
	}
}
