package stats

import (
	"fmt"
	"testing"
)

// BenchmarkRecordLookup measures the cost that counting adds to a request:
// one RecordLookup of a hit with a run id, from parallel goroutines.
// BenchmarkRecordLookupNotAdmitted is the same in a namespace not admitted
// (a reader probing namespaces), counted under Other.
func BenchmarkRecordLookup(b *testing.B) {
	s, err := Open(Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s.AdmitNamespace("team-a")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s.RecordLookup(Lookup{Namespace: "team-a", Backend: "xla", Run: "sweep-1", Key: key(i % 64), Name: "jit_f", Hit: true, Bytes: 4096, CompileSeconds: 2.5})
			i++
		}
	})
}

func BenchmarkRecordLookupNotAdmitted(b *testing.B) {
	s, err := Open(Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s.RecordLookup(Lookup{Namespace: "probe", Backend: "xla", Key: key(i % 64)})
			i++
		}
	})
}

// BenchmarkRunTableEvict measures admitting a new run to a full run table,
// which evicts the least recently seen run of the namespace holding the
// most: the table's size (500 is the default MaxRuns) spread over 4
// namespaces, every run seen at a different second.
func BenchmarkRunTableEvict(b *testing.B) {
	for _, size := range []int{500, 5000} {
		b.Run(fmt.Sprint("runs=", size), func(b *testing.B) {
			t := newRunTable(size)
			nss := []string{"ns-0", "ns-1", "ns-2", "ns-3"}
			now := int64(1)
			for i := range size {
				now++
				t.admit(fmt.Sprint("old-", i), nss[i%4], now)
			}
			ids := make([]string, b.N)
			for i := range ids {
				ids[i] = fmt.Sprint("new-", i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				now++
				t.admit(ids[i], nss[i%4], now)
			}
		})
	}
}
