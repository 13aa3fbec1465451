package explain

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkExplainMiss explains misses in a group of n xla-like entries
// (xlaEntry): one that differs from the oldest entry only in its XLA flags
// (the nearest is the oldest entry), and one of a new program (a new module
// whose flags a third of the entries share: that posting list is long). It
// reports the median latency of one explanation (p50-ns) and the heap the
// index holds per entry (index-B/entry, measured after a GC, so it includes
// maps' and slices' spare capacity).
//
//	go test -run '^$' -bench BenchmarkExplainMiss -benchtime 200x ./explain/
func BenchmarkExplainMiss(b *testing.B) {
	oldFlag := xlaEntry(0)
	oldFlag["xla_flags"] = "--xla_gpu_autotune_level=4"
	newProgram := xlaEntry(1)
	newProgram["module"], newProgram["module_bytes"] = strings.Repeat("77", 32), "999"
	cases := []struct {
		name, reason string
		want         map[string]string
	}{
		{"old-entry-flag", "xla_flags", oldFlag},
		{"new-program", "module", newProgram},
	}
	for _, n := range []int{2_000, 82_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			if testing.Short() && n > 100_000 {
				b.Skip("large index in -short")
			}
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			before := heapInUse()
			x := NewIndex(IndexConfig{})
			for i := range n {
				x.Add("ns", "xla", xlaKey(i), fmt.Sprint("jit_train_step_", i), t0.Add(time.Duration(i)*time.Millisecond), xlaEntry(i))
			}
			perEntry := float64(heapInUse()-before) / float64(n)
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					if ex := x.Explain("ns", "xla", c.want); ex.Reason != c.reason {
						b.Fatalf("reason %q, want %q", ex.Reason, c.reason)
					}
					lat := make([]time.Duration, 0, b.N)
					b.ReportAllocs()
					for b.Loop() {
						s := time.Now()
						x.Explain("ns", "xla", c.want)
						lat = append(lat, time.Since(s))
					}
					slices.Sort(lat)
					b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
					b.ReportMetric(perEntry, "index-B/entry")
				})
			}
			runtime.KeepAlive(x)
		})
	}
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
