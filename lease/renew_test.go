package lease

import (
	"testing"
	"time"
)

// TestRenewalNeverShortens: a renewal by the holder of a live lease (another
// thread of its process asking with its own, shorter ttl_s) leaves the
// lease's expiry where it was when that is later, so that the thread that
// took it for a long compile keeps it; a longer renewal extends it. On one
// replica and in a fleet alike.
func TestRenewalNeverShortens(t *testing.T) {
	for _, shared := range []bool{false, true} {
		clk := &clock{t: time.Unix(1000, 0)}
		tb := New(Config{Now: clk.Now})
		name := "local"
		if shared {
			tb, name = fleet(t, 1, newMemShared(), clk)[0], "shared"
		}
		k := key(3)
		steps := []struct {
			name        string
			advance     time.Duration
			ttl         time.Duration
			wantExpires time.Duration // after the start
		}{
			{"taken for an hour", 0, time.Hour, time.Hour},
			{"a shorter renewal keeps the hour", time.Minute, 5 * time.Second, time.Hour},
			{"a longer renewal extends it", time.Minute, time.Hour, 2*time.Minute + time.Hour},
		}
		start := clk.Now()
		for _, s := range steps {
			clk.Add(s.advance)
			l, granted, err := tb.Acquire(ctx, "ns", k, "host:1", s.ttl)
			if err != nil || !granted || !l.Expires.Equal(start.Add(s.wantExpires)) {
				t.Fatalf("%s: %s: granted=%v expires=+%v err=%v, want granted, expires=+%v", name, s.name, granted, l.Expires.Sub(start), err, s.wantExpires)
			}
		}
		// Another holder sees the hour, not the five seconds.
		clk.Add(10 * time.Second)
		if l, granted, _ := tb.Acquire(ctx, "ns", k, "host:2", time.Minute); granted {
			t.Fatalf("%s: another holder was granted the lease %v after a short renewal", name, l)
		}
	}
}
