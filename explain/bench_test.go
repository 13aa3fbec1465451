package explain

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

// BenchmarkExplainMiss explains a miss that differs from the oldest entry
// only in its XLA flags, in a group of n xla-like entries (xlaEntry). It
// reports the median latency of one explanation (p50-ns) and the heap the
// index holds per entry (index-B/entry, measured after a GC, so it includes
// maps' and slices' spare capacity).
//
//	go test -run '^$' -bench BenchmarkExplainMiss -benchtime 200x ./explain/
func BenchmarkExplainMiss(b *testing.B) {
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
			want := xlaEntry(0)
			want["xla_flags"] = "--xla_gpu_autotune_level=4"
			if ex := x.Explain("ns", "xla", want); ex.Reason != "xla_flags" {
				b.Fatalf("reason %q", ex.Reason)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				s := time.Now()
				x.Explain("ns", "xla", want)
				lat = append(lat, time.Since(s))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(perEntry, "index-B/entry")
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
