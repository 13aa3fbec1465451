package limit

import (
	"fmt"
	"testing"
)

// BenchmarkRatesFullTableNewKey is a request from a new client address
// while every bucket of the table is in use (a client sending from many
// addresses keeps it so): it is refused. The time per request must not
// grow with the table: the scan for an idle bucket runs once until a
// bucket can have refilled, not once per request (each scan holds the lock
// every request takes: ~250 µs at 10,000 buckets).
func BenchmarkRatesFullTableNewKey(b *testing.B) {
	for _, size := range []int{1000, 10_000} {
		b.Run(fmt.Sprint("buckets=", size), func(b *testing.B) {
			r := NewRates(0.001, 1, size) // a bucket refills in 1,000 s
			for i := range size {
				r.Allow(fmt.Sprint("busy-", i))
			}
			keys := make([]string, 1024)
			for i := range keys {
				keys[i] = fmt.Sprint("new-", i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if ok, _ := r.Allow(keys[i%len(keys)]); ok {
					b.Fatal("a new key was admitted to a table full of buckets in use")
				}
			}
		})
	}
}
