package stats

import (
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/explain"
	"github.com/cachesvc/cachesvc/manifest"
	"github.com/cachesvc/cachesvc/wire"
)

// eachString calls fn with the path and value of every string in v: fields,
// elements and map keys.
func eachString(path string, v reflect.Value, fn func(path, s string)) {
	switch v.Kind() {
	case reflect.String:
		fn(path, v.String())
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			eachString(path, v.Elem(), fn)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				eachString(path+"."+v.Type().Field(i).Name, v.Field(i), fn)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			eachString(path+"[]", v.Index(i), fn)
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			eachString(path+"{key}", it.Key(), fn)
			eachString(path+"{}", it.Value(), fn)
		}
	}
}

// checkLabels fails t unless every string of the snapshot, the series and
// the misses of every namespace is valid UTF-8, and every backend,
// namespace and run label is valid or one of UnknownBackend and Other.
func checkLabels(t *testing.T, when string, s *Stats) {
	t.Helper()
	snap := s.Snapshot(SnapshotOptions{})
	ser, err := s.Series("", time.Now().Add(-time.Hour), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	reports := []MissReport{}
	for _, n := range snap.Namespaces {
		reports = append(reports, s.Misses(n.Namespace, 0))
	}
	for _, v := range []any{snap, ser, reports} {
		eachString(when, reflect.ValueOf(v), func(path, str string) {
			if !utf8.ValidString(str) {
				t.Errorf("%s: %s = %q is not valid UTF-8", when, path, str)
			}
		})
	}
	backend := func(what, b string) {
		if b != UnknownBackend && b != Other && wire.CheckBackend(b) != nil {
			t.Errorf("%s: %s backend %q", when, what, b)
		}
	}
	namespace := func(what, ns string) {
		if ns != Other && cachekey.ValidateNamespace(ns) != nil {
			t.Errorf("%s: %s namespace %q", when, what, ns)
		}
	}
	for _, b := range snap.Backends {
		backend("snapshot", b.Backend)
	}
	for _, n := range snap.Namespaces {
		namespace("snapshot", n.Namespace)
		for _, b := range n.Backends {
			backend("namespace "+n.Namespace, b.Backend)
		}
	}
	for _, r := range snap.Runs {
		if r.Run != Other && manifest.ValidateRun(r.Run) != nil {
			t.Errorf("%s: run %q", when, r.Run)
		}
		for _, ns := range r.Namespaces {
			namespace("run "+r.Run, ns)
		}
	}
	for _, e := range snap.TopEntries {
		namespace("top entry", e.Namespace)
		backend("top entry", e.Backend)
	}
	for b := range ser.Backends {
		backend("series", b)
	}
	for ns := range ser.Namespaces {
		namespace("series", ns)
	}
	for _, rep := range reports {
		for _, m := range rep.Recent {
			namespace("miss", m.Namespace)
			backend("miss", m.Backend)
			if m.Run != "" && m.Run != Other && manifest.ValidateRun(m.Run) != nil {
				t.Errorf("%s: miss run %q", when, m.Run)
			}
		}
	}
}

// TestBadLabelsAreSanitized is issue 12's bug 1 (persisted part): a lookup
// with the backend 0xff was saved in the stats database and broke /metrics
// for good; /v1/stats listed a backend named "\ufffd".
func TestBadLabelsAreSanitized(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.RecordWrite(Write{Namespace: "team-a", Backend: "xla\xff", Run: "run\xff", Key: key(1), Name: "jit_\xff", Bytes: 10,
		Components: map[string]string{"platform": "cpu"}})
	tests := []Lookup{
		{Namespace: "team-a", Backend: "\xff", Run: "r1", Key: key(1), Name: "jit_\xff\x00", Hit: true, Bytes: 1, CompileSeconds: 1},
		{Namespace: "team-\xff", Backend: "xla", Run: "\xff", Key: key(2), Name: "ok", Hit: true, Bytes: 1, CompileSeconds: 1},
		{Namespace: "\xff", Backend: "XLA", Run: "r 1", Key: key(3), Hit: true, Bytes: 1, CompileSeconds: 1},
		{Namespace: "", Backend: "", Hit: false},
		{Namespace: "team-a", Backend: "x\x00y", Hit: false},
	}
	for _, l := range tests {
		s.RecordLookup(l)
	}
	ex := s.Explain("team-a", "xla\xff", map[string]string{"platform": "tpu"})
	s.RecordMiss(Miss{Namespace: "team-\xff", Backend: "\xff", Key: "\xff", DisplayName: "\xffname", Run: "\xff", Explanation: ex})
	s.RecordMiss(Miss{Namespace: "team-a", Backend: "xla", Key: "k", Explanation: explain.Explanation{Reason: "flags\xff", Summary: "bad \xff",
		Nearest: []explain.Nearest{{Key: "\xff", Name: "\xff", Diffs: []explain.Diff{{Component: "\xff", Want: "\xff", Have: "\xfe"}}}}}})
	s.RecordEvictions("\xff", "\xff", wire.ReasonSize, 2)
	checkLabels(t, "recorded", s)
	tot := s.Snapshot(SnapshotOptions{}).Totals
	if tot.Lookups != 5 || tot.Hits != 3 || tot.Writes != 1 || tot.Evictions != 2 {
		t.Fatalf("totals = %+v", tot)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	s2 := reopen(t, s, dir)
	checkLabels(t, "reopened", s2)
	if got := s2.Snapshot(SnapshotOptions{}).Totals; got != tot {
		t.Fatalf("totals after reopening = %+v, want %+v", got, tot)
	}
}
