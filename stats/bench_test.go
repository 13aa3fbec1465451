package stats

import (
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
