package manifest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
)

var ctx = context.Background()

func key(b byte) cachekey.Key { var k cachekey.Key; k[31] = b; return k }

type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

func TestManifestRecordsLookupsAndWrites(t *testing.T) {
	r, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	r.RecordLookup("ns", "run1", key(1))
	r.RecordWrite("ns", "run1", key(1), "jit_f-abc")
	r.RecordLookup("ns", "run1", key(2))
	r.RecordWrite("ns", "run1", key(3), "")
	r.RecordLookup("ns", "run1", key(1))
	r.RecordLookup("other", "run1", key(9))

	m, err := r.Manifest(ctx, "ns", "run1")
	if err != nil {
		t.Fatal(err)
	}
	want := []KeyRecord{
		{Key: key(1).String(), Name: "jit_f-abc", LookedUp: true, Written: true},
		{Key: key(2).String(), LookedUp: true},
		{Key: key(3).String(), Written: true},
	}
	if len(m.Keys) != len(want) {
		t.Fatalf("keys = %+v", m.Keys)
	}
	for i := range want {
		if m.Keys[i] != want[i] {
			t.Errorf("keys[%d] = %+v, want %+v", i, m.Keys[i], want[i])
		}
	}
	if m.Truncated || m.Run != "run1" || m.Namespace != "ns" {
		t.Errorf("manifest header = %+v", m)
	}
	if _, err := r.Manifest(ctx, "ns", "nope"); !errors.Is(err, ErrUnknownRun) {
		t.Errorf("unknown run err = %v", err)
	}
}

func TestBounds(t *testing.T) {
	clk := &clock{t: time.Unix(1e6, 0)}
	tests := []struct {
		name  string
		cfg   Config
		do    func(r *Recorder)
		check func(t *testing.T, r *Recorder)
	}{
		{
			name: "keys per run truncate",
			cfg:  Config{MaxKeysPerRun: 2},
			do: func(r *Recorder) {
				for i := byte(0); i < 5; i++ {
					r.RecordLookup("ns", "a", key(i))
				}
			},
			check: func(t *testing.T, r *Recorder) {
				m, _ := r.Manifest(ctx, "ns", "a")
				if len(m.Keys) != 2 || !m.Truncated {
					t.Fatalf("keys=%d truncated=%v", len(m.Keys), m.Truncated)
				}
			},
		},
		{
			name: "runs evict least recently updated",
			cfg:  Config{MaxRuns: 2},
			do: func(r *Recorder) {
				r.RecordLookup("ns", "a", key(1))
				clk.t = clk.t.Add(time.Second)
				r.RecordLookup("ns", "b", key(1))
				clk.t = clk.t.Add(time.Second)
				r.RecordLookup("ns", "a", key(2))
				clk.t = clk.t.Add(time.Second)
				r.RecordLookup("ns", "c", key(1))
			},
			check: func(t *testing.T, r *Recorder) {
				if _, err := r.Manifest(ctx, "ns", "b"); !errors.Is(err, ErrUnknownRun) {
					t.Fatal("run b should have been evicted")
				}
				if _, err := r.Manifest(ctx, "ns", "a"); err != nil {
					t.Fatal(err)
				}
				if runs, keys := r.Counts(); runs != 2 || keys != 3 {
					t.Fatalf("counts = %d, %d", runs, keys)
				}
			},
		},
		{
			name: "total keys evict other runs",
			cfg:  Config{MaxTotalKeys: 3},
			do: func(r *Recorder) {
				r.RecordLookup("ns", "a", key(1))
				r.RecordLookup("ns", "a", key(2))
				clk.t = clk.t.Add(time.Second)
				r.RecordLookup("ns", "b", key(1))
				r.RecordLookup("ns", "b", key(2))
				r.RecordLookup("ns", "b", key(3))
				r.RecordLookup("ns", "b", key(4))
			},
			check: func(t *testing.T, r *Recorder) {
				if _, err := r.Manifest(ctx, "ns", "a"); err == nil {
					t.Fatal("run a should have been evicted")
				}
				m, _ := r.Manifest(ctx, "ns", "b")
				if len(m.Keys) != 3 || !m.Truncated {
					t.Fatalf("keys=%d truncated=%v", len(m.Keys), m.Truncated)
				}
			},
		},
		{
			name: "a namespace flooding runs evicts its own, not another's older ones",
			cfg:  Config{MaxRuns: 4},
			do: func(r *Recorder) {
				r.RecordLookup("team-a", "sweep1", key(1)) // the oldest run of all
				for i := range 10 {
					clk.t = clk.t.Add(time.Second)
					r.RecordLookup("team-b", fmt.Sprintf("flood-%d", i), key(1))
				}
			},
			check: func(t *testing.T, r *Recorder) {
				if _, err := r.Manifest(ctx, "team-a", "sweep1"); err != nil {
					t.Fatalf("team-a's run was evicted by team-b's flood: %v", err)
				}
				for i, want := range []bool{false, false, false, false, false, false, false, true, true, true} {
					if _, err := r.Manifest(ctx, "team-b", fmt.Sprintf("flood-%d", i)); (err == nil) != want {
						t.Errorf("flood-%d kept = %v, want %v", i, err == nil, want)
					}
				}
			},
		},
		{
			name: "the namespace holding the most runs gives way, down to a fair share",
			cfg:  Config{MaxRuns: 4},
			do: func(r *Recorder) {
				r.RecordLookup("team-b", "b0", key(1)) // the oldest run of all
				for i := range 4 {
					clk.t = clk.t.Add(time.Second)
					r.RecordLookup("team-a", fmt.Sprintf("a%d", i), key(1))
				}
				clk.t = clk.t.Add(time.Second)
				r.RecordLookup("team-b", "b1", key(1))
			},
			check: func(t *testing.T, r *Recorder) {
				for _, c := range []struct {
					ns, run string
					kept    bool
				}{{"team-a", "a0", false}, {"team-a", "a1", false}, {"team-a", "a2", true}, {"team-a", "a3", true}, {"team-b", "b0", true}, {"team-b", "b1", true}} {
					if _, err := r.Manifest(ctx, c.ns, c.run); (err == nil) != c.kept {
						t.Errorf("%s/%s kept = %v, want %v", c.ns, c.run, err == nil, c.kept)
					}
				}
			},
		},
		{
			name: "at the total-key bound the namespace holding the most keys gives way",
			cfg:  Config{MaxTotalKeys: 5},
			do: func(r *Recorder) {
				r.RecordLookup("team-a", "small", key(1)) // oldest, but its namespace holds the fewest keys
				for i := range 3 {
					clk.t = clk.t.Add(time.Second)
					r.RecordLookup("team-b", "big1", key(byte(10+i)))
				}
				clk.t = clk.t.Add(time.Second)
				r.RecordLookup("team-b", "big2", key(20))
				r.RecordLookup("team-b", "big2", key(21))
			},
			check: func(t *testing.T, r *Recorder) {
				if _, err := r.Manifest(ctx, "team-a", "small"); err != nil {
					t.Fatalf("team-a's run was evicted: %v", err)
				}
				if _, err := r.Manifest(ctx, "team-b", "big1"); !errors.Is(err, ErrUnknownRun) {
					t.Fatalf("team-b's older run was kept: %v", err)
				}
			},
		},
		{
			name: "expiry",
			cfg:  Config{TTL: time.Hour},
			do: func(r *Recorder) {
				r.RecordLookup("ns", "a", key(1))
				clk.t = clk.t.Add(2 * time.Hour)
			},
			check: func(t *testing.T, r *Recorder) {
				if _, err := r.Manifest(ctx, "ns", "a"); !errors.Is(err, ErrUnknownRun) {
					t.Fatal("expired run must be unknown")
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Now = clk.Now
			r, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			tt.do(r)
			tt.check(t, r)
		})
	}
}

func TestSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "runs.json")
	r, err := New(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	r.RecordWrite("ns", "r1", key(1), "jit_g-1")
	r.RecordLookup("ns", "r1", key(2))
	if err := r.Save(); err != nil {
		t.Fatal(err)
	}
	r2, err := New(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	m1, _ := r.Manifest(ctx, "ns", "r1")
	m2, err := r2.Manifest(ctx, "ns", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(m2.Keys) != 2 || m2.Keys[0] != m1.Keys[0] || m2.Keys[1] != m1.Keys[1] {
		t.Fatalf("reloaded %+v, want %+v", m2.Keys, m1.Keys)
	}
	// Recording into a reloaded run must not duplicate keys.
	r2.RecordLookup("ns", "r1", key(1))
	if m, _ := r2.Manifest(ctx, "ns", "r1"); len(m.Keys) != 2 || !m.Keys[0].LookedUp {
		t.Fatalf("after reload: %+v", m.Keys)
	}
}

func TestValidateRun(t *testing.T) {
	for _, ok := range []string{"a", "sweep-1.arm_2", "job:42@host+x"} {
		if err := ValidateRun(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-x", "a b", "a/b", string(make([]byte, 129))} {
		if err := ValidateRun(bad); !errors.Is(err, ErrInvalidRun) {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
	// An over-long id is cut in the message (a 16 KiB header was echoed whole).
	if err := ValidateRun(strings.Repeat("a", 5000)); err == nil || len(err.Error()) > 400 {
		t.Errorf("5000-character run id: message of %d bytes", len(err.Error()))
	}
}

func TestConcurrentRecording(t *testing.T) {
	r, _ := New(Config{MaxKeysPerRun: 100, MaxRuns: 4})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				run := string(rune('a' + (g+i)%6))
				r.RecordLookup("ns", run, key(byte(i)))
				r.Manifest(ctx, "ns", run)
			}
		}(g)
	}
	wg.Wait()
	runs, keys := r.Counts()
	if runs > 4 || keys > 400 {
		t.Fatalf("bounds exceeded: runs=%d keys=%d", runs, keys)
	}
}
