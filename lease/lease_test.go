package lease

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
)

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

var ctx = context.Background()

func key(b byte) cachekey.Key { var k cachekey.Key; k[0] = b; return k }

func TestAcquireTable(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	tb := New(Config{Now: clk.Now})
	k := key(1)
	steps := []struct {
		name    string
		advance time.Duration
		holder  string
		ttl     time.Duration
		granted bool
		holds   string
		renewed bool
	}{
		{"first caller gets it", 0, "a", 10 * time.Second, true, "a", false},
		{"second caller sees holder", time.Second, "b", 10 * time.Second, false, "a", false},
		{"holder renews", time.Second, "a", 10 * time.Second, true, "a", true},
		{"still held before new expiry", 9 * time.Second, "b", 10 * time.Second, false, "a", false},
		{"taken over after expiry", 2 * time.Second, "b", 5 * time.Second, true, "b", false},
		{"old holder refused", 0, "a", 5 * time.Second, false, "b", false},
		{"own lease lapsed: a new grant", 6 * time.Second, "b", 5 * time.Second, true, "b", false},
	}
	for _, s := range steps {
		clk.Add(s.advance)
		l, granted, err := tb.Acquire(ctx, "ns", k, s.holder, s.ttl)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if granted != s.granted || l.Holder != s.holds || l.Renewed != s.renewed {
			t.Fatalf("%s: granted=%v holder=%q renewed=%v, want %v %q %v", s.name, granted, l.Holder, l.Renewed, s.granted, s.holds, s.renewed)
		}
	}
	if held, _ := tb.Counts(); held != 1 {
		t.Fatalf("held = %d, want 1", held)
	}
}

func TestBadHolder(t *testing.T) {
	tb := New(Config{})
	for _, h := range []string{"", string(make([]byte, MaxHolderLen+1))} {
		if _, _, err := tb.Acquire(ctx, "ns", key(1), h, time.Second); !errors.Is(err, ErrInvalidHolder) {
			t.Fatalf("holder len %d: err = %v, want ErrInvalidHolder", len(h), err)
		}
	}
}

func TestTableBound(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	tb := New(Config{MaxLeases: 2, Now: clk.Now})
	for i := byte(0); i < 2; i++ {
		if _, ok, err := tb.Acquire(ctx, "ns", key(i), "h", time.Second); err != nil || !ok {
			t.Fatalf("acquire %d: ok=%v err=%v", i, ok, err)
		}
	}
	if _, _, err := tb.Acquire(ctx, "ns", key(9), "h", time.Second); !errors.Is(err, ErrTableFull) {
		t.Fatalf("err = %v, want ErrTableFull", err)
	}
	// A renewal of an existing lease is allowed at the bound.
	if _, ok, err := tb.Acquire(ctx, "ns", key(0), "h", time.Second); err != nil || !ok {
		t.Fatalf("renew at bound: ok=%v err=%v", ok, err)
	}
	// Expired leases are swept to make room, waking their waiters.
	w, _, ok, err := tb.Wait(ctx, "ns", key(1))
	if err != nil || !ok {
		t.Fatalf("wait: ok=%v err=%v", ok, err)
	}
	clk.Add(2 * time.Second)
	if _, ok, err := tb.Acquire(ctx, "ns", key(9), "h", time.Second); err != nil || !ok {
		t.Fatalf("acquire after expiry: ok=%v err=%v", ok, err)
	}
	<-w.C()
	if w.Outcome() != Expired {
		t.Fatalf("outcome = %v, want expired", w.Outcome())
	}
}

func TestWaitOutcomes(t *testing.T) {
	tests := []struct {
		name string
		end  func(tb *Table, k cachekey.Key) error
		want Outcome
	}{
		{"written", func(tb *Table, k cachekey.Key) error { tb.Written(ctx, "ns", k); return nil }, Written},
		{"released", func(tb *Table, k cachekey.Key) error { _, err := tb.Release(ctx, "ns", k, "a"); return err }, Released},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := New(Config{})
			k := key(7)
			if _, _, ok, _ := tb.Wait(ctx, "ns", k); ok {
				t.Fatal("wait without lease must report ok=false")
			}
			if _, ok, err := tb.Acquire(ctx, "ns", k, "a", time.Minute); !ok || err != nil {
				t.Fatalf("acquire: %v %v", ok, err)
			}
			var ws []*Waiter
			for i := 0; i < 5; i++ {
				w, l, ok, err := tb.Wait(ctx, "ns", k)
				if err != nil || !ok || l.Holder != "a" {
					t.Fatalf("wait: %v %v %+v", ok, err, l)
				}
				ws = append(ws, w)
			}
			if w := ws[0]; w.Outcome() != Pending {
				t.Fatalf("outcome before end = %v", w.Outcome())
			}
			tb.Cancel(ws[4])
			if err := tt.end(tb, k); err != nil {
				t.Fatal(err)
			}
			for _, w := range ws[:4] {
				<-w.C()
				if w.Outcome() != tt.want {
					t.Fatalf("outcome = %v, want %v", w.Outcome(), tt.want)
				}
				tb.Cancel(w) // harmless after wake
			}
			if held, waiting := tb.Counts(); held != 0 || waiting != 0 {
				t.Fatalf("counts = %d, %d; want 0, 0", held, waiting)
			}
			if _, ok := tb.Holder(ctx, "ns", k); ok {
				t.Fatal("lease still held")
			}
		})
	}
}

func TestReleaseErrors(t *testing.T) {
	tb := New(Config{})
	k := key(3)
	if _, err := tb.Release(ctx, "ns", k, "a"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("err = %v, want ErrNotHeld", err)
	}
	tb.Acquire(ctx, "ns", k, "a", time.Minute)
	if l, err := tb.Release(ctx, "ns", k, "b"); !errors.Is(err, ErrHeldByOther) || l.Holder != "a" {
		t.Fatalf("err = %v holder %q, want ErrHeldByOther by a", err, l.Holder)
	}
	if _, ok, _ := tb.Acquire(ctx, "other", k, "b", time.Minute); !ok {
		t.Fatal("namespaces must not share leases")
	}
}

func TestWaiterBound(t *testing.T) {
	tb := New(Config{MaxWaiters: 3})
	k := key(1)
	tb.Acquire(ctx, "ns", k, "a", time.Minute)
	for i := 0; i < 3; i++ {
		if _, _, _, err := tb.Wait(ctx, "ns", k); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := tb.Wait(ctx, "ns", k); !errors.Is(err, ErrTooManyWaiters) {
		t.Fatalf("err = %v, want ErrTooManyWaiters", err)
	}
}

// TestHammer races acquirers, waiters and writers; run with -race.
func TestHammer(t *testing.T) {
	tb := New(Config{MaxLeases: 8, MaxWaiters: 64})
	var granted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				k := key(byte(i % 4))
				if _, ok, err := tb.Acquire(ctx, "ns", k, string(rune('a'+g)), time.Minute); err == nil && ok {
					granted.Add(1)
					tb.Written(ctx, "ns", k)
					continue
				}
				if w, _, ok, err := tb.Wait(ctx, "ns", k); err == nil && ok {
					select {
					case <-w.C():
					case <-time.After(time.Millisecond):
						tb.Cancel(w)
					}
				}
			}
		}(g)
	}
	wg.Wait()
	if held, waiting := tb.Counts(); held != 0 || waiting != 0 {
		t.Fatalf("counts after hammer = %d, %d", held, waiting)
	}
	if granted.Load() == 0 {
		t.Fatal("no lease was ever granted")
	}
}

func TestClose(t *testing.T) {
	tb := New(Config{})
	tb.Acquire(ctx, "ns", key(1), "a", time.Minute)
	w, _, ok, err := tb.Wait(ctx, "ns", key(1))
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	tb.Close()
	<-w.C()
	if w.Outcome() != Closed {
		t.Fatalf("outcome = %v", w.Outcome())
	}
	if _, _, ok, _ := tb.Wait(ctx, "ns", key(1)); ok {
		t.Fatal("wait after Close must not park")
	}
	if _, waiting := tb.Counts(); waiting != 0 {
		t.Fatalf("waiting = %d", waiting)
	}
	tb.Written(ctx, "ns", key(1)) // no double close
}
