package explain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// xlaEntry returns the components of the i-th synthetic xla entry: what
// the xla plugin emits, every component shared by most entries but the
// module (its own digest and size), as in a namespace of many programs
// compiled with the same toolchain.
func xlaEntry(i int) map[string]string {
	sum := sha256.Sum256([]byte(fmt.Sprint("module ", i)))
	return map[string]string{
		"module":           hex.EncodeToString(sum[:]),
		"module_bytes":     fmt.Sprint(1000 + i%5000),
		"jax_version":      "0.4.38",
		"jaxlib_version":   "0.4.38",
		"jaxlib_build":     strings.Repeat("ab", 32),
		"platform":         "cuda",
		"platform_version": "12.4",
		"xla_flags":        fmt.Sprintf("--xla_gpu_autotune_level=%d", i%3),
		"compile_options":  strings.Repeat("4e", 32),
		"topology":         "8xH100",
	}
}

func xlaKey(i int) string { return fmt.Sprintf("%064x", i) }

// TestIndexExactAtAnySize: a miss that differs from the first entry written
// (the oldest, which a bounded window of recent entries no longer holds)
// only in one component is explained by that component alone, whatever the
// number of entries.
func TestIndexExactAtAnySize(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sizes := []int{2_000, 100_000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, n := range sizes {
		x := NewIndex(IndexConfig{})
		for i := range n {
			x.Add("ns", "xla", xlaKey(i), fmt.Sprint("jit_f", i), t0.Add(time.Duration(i)*time.Second), xlaEntry(i))
		}
		tests := []struct {
			name, component, value, reason string
		}{
			{"one flag", "xla_flags", "--xla_gpu_autotune_level=4", "xla_flags"},
			{"jaxlib version", "jaxlib_version", "0.4.36", "jaxlib_version"},
			{"platform", "platform", "rocm", "platform"},
			{"absent component", "custom_hook", "h1", "custom_hook"},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%d/%s", n, tt.name), func(t *testing.T) {
				want := xlaEntry(0)
				want[tt.component] = tt.value
				ex := x.Explain("ns", "xla", want)
				if ex.Reason != tt.reason {
					t.Fatalf("reason = %q, want %q (summary %q)", ex.Reason, tt.reason, ex.Summary)
				}
				if ex.Compared != n || len(ex.Nearest) != MaxNearest || ex.Nearest[0].Key != xlaKey(0) || ex.Nearest[0].Name != "jit_f0" {
					t.Fatalf("compared %d, nearest %+v", ex.Compared, ex.Nearest)
				}
				if d := ex.Nearest[0].Diffs; len(d) != 1 || d[0].Component != tt.component || d[0].Want != tt.value {
					t.Fatalf("diffs = %+v", d)
				}
				// The others differ in the module too; the newest first.
				if ex.Nearest[1].Created.Before(ex.Nearest[2].Created) || len(ex.Nearest[1].Diffs) <= 1 {
					t.Errorf("second and third nearest = %+v", ex.Nearest[1:])
				}
				if strings.Contains(ex.Summary, "Approximate") {
					t.Errorf("summary %q says approximate below the bound", ex.Summary)
				}
			})
		}
	}
}

// TestIndexMatchesExplain checks that the index finds exactly what Explain
// finds comparing with every live entry, through re-writes, removals and
// the compactions they cause, on random components drawn from small
// alphabets (so that many entries share values and distances tie).
func TestIndexMatchesExplain(t *testing.T) {
	tests := []matchCase{
		{"small", 1, 50, 10, false},
		{"rewrites", 2, 400, 0, false},
		{"compacted", 3, 4000, 2500, false},
		{"created out of order", 4, 2000, 300, true},
	}
	for _, tt := range tests {
		// With the default, no list here is long enough to be common; with
		// 3, most are, and are checked entry by entry.
		for _, commonList := range []int{4096, 3} {
			t.Run(fmt.Sprintf("%s/common>%d", tt.name, commonList), func(t *testing.T) {
				tt.check(t, commonList)
			})
		}
	}
}

// matchCase is one case of TestIndexMatchesExplain.
type matchCase struct {
	name            string
	seed            uint64
	writes, removes int
	shuffled        bool // created times not in write order (as seeded from the store)
}

func (tt matchCase) check(t *testing.T, commonList int) {
	names := []string{"module", "module_bytes", "platform", "xla_flags", "jaxlib_version", "topology"}
	values := []string{"a", "b", "c", strings.Repeat("9f", 32), strings.Repeat("x", 200)}
	r := rand.New(rand.NewPCG(tt.seed, 0))
	comps := func() map[string]string {
		m := map[string]string{}
		for _, n := range names {
			if r.IntN(8) > 0 {
				m[n] = values[r.IntN(len(values))]
			}
		}
		if len(m) == 0 {
			m["module"] = "a"
		}
		return m
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	x := NewIndex(IndexConfig{})
	x.commonList = commonList
	live := map[string]Candidate{}
	order := make([]int, tt.writes)
	for i := range order {
		order[i] = i
	}
	if tt.shuffled {
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	for i := range tt.writes {
		c := Candidate{Key: fmt.Sprint("k", r.IntN(tt.writes*3/4+1)), Name: fmt.Sprint("n", i), Created: t0.Add(time.Duration(order[i]) * time.Second), Components: comps()}
		x.Add("ns", "xla", c.Key, c.Name, c.Created, c.Components)
		live[c.Key] = c
	}
	for range tt.removes {
		k := fmt.Sprint("k", r.IntN(tt.writes*3/4+1))
		x.Remove("ns", "xla", k)
		delete(live, k)
	}
	if x.Len("ns", "xla") != len(live) {
		t.Fatalf("len = %d, want %d", x.Len("ns", "xla"), len(live))
	}
	if g := x.groups[groupKey{"ns", "xla", ""}]; tt.removes > 2000 && len(g.entries) >= tt.writes {
		t.Fatalf("%d ids for %d writes: never compacted", len(g.entries), tt.writes)
	}
	cands := make([]Candidate, 0, len(live))
	for _, c := range live {
		cands = append(cands, c)
	}
	for q := range 200 {
		want := comps()
		got, exp := x.Explain("ns", "xla", want), Explain(want, cands)
		if got.Reason != exp.Reason || got.Summary != exp.Summary || got.Compared != exp.Compared || len(got.Nearest) != len(exp.Nearest) {
			t.Fatalf("query %d %v:\n got %+v\nwant %+v", q, want, got, exp)
		}
		for i := range got.Nearest {
			g, e := got.Nearest[i], exp.Nearest[i]
			if g.Key != e.Key || g.Name != e.Name || !g.Created.Equal(e.Created) || !reflect.DeepEqual(g.Diffs, e.Diffs) {
				t.Fatalf("query %d %v nearest %d:\n got %+v\nwant %+v", q, want, i, g, e)
			}
		}
	}
}

// TestIndexBounds: at PerGroup the least recently written entries leave
// and the explanation says it is approximate; at MaxEntries the largest
// group gives up its oldest; Forget removes a key whatever its backend.
func TestIndexBounds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	add := func(x *Index, ns string, from, to int) {
		for i := from; i < to; i++ {
			x.Add(ns, "xla", xlaKey(i), "", t0.Add(time.Duration(i)*time.Second), xlaEntry(i))
		}
	}
	x := NewIndex(IndexConfig{PerGroup: 100})
	add(x, "ns", 0, 150)
	want := xlaEntry(0)
	want["xla_flags"] = "--other"
	ex := x.Explain("ns", "xla", want)
	if x.Len("ns", "xla") != 100 || ex.Compared != 100 || !strings.Contains(ex.Summary, "Approximate: 50 older entries") {
		t.Fatalf("len %d, explanation %+v", x.Len("ns", "xla"), ex)
	}
	if x.Dropped() != 50 || ex.Nearest[0].Key == xlaKey(0) || ex.Reason != "module+xla_flags" {
		t.Fatalf("the dropped entry is still compared: %+v", ex)
	}

	x = NewIndex(IndexConfig{MaxEntries: 100})
	add(x, "a", 0, 80)
	add(x, "b", 0, 40)
	if a, b := x.Len("a", "xla"), x.Len("b", "xla"); a != 60 || b != 40 || x.Entries() != 100 {
		t.Fatalf("a %d b %d total %d, want 60 40 100", a, b, x.Entries())
	}
	x.Add("a", "other", xlaKey(50), "", t0, xlaEntry(50))
	x.Forget("a", xlaKey(50)) // in a/xla and a/other
	if x.Len("a", "other") != 0 || x.Entries() != 98 {
		t.Fatalf("after Forget: a/other %d, total %d", x.Len("a", "other"), x.Entries())
	}
}

// TestIndexConcurrent hammers one index from writers, removers and
// explainers at once (run with -race): every explanation stays consistent
// with some state of the index.
func TestIndexConcurrent(t *testing.T) {
	x := NewIndex(IndexConfig{PerGroup: 3000})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := w*2000 + i
				switch w {
				case 0, 1: // writers, one of them out of time order
					at := t0.Add(time.Duration(k) * time.Second)
					if w == 1 {
						at = t0.Add(-time.Duration(k) * time.Second)
					}
					x.Add("ns", "xla", xlaKey(k), "", at, xlaEntry(k))
				case 2:
					x.Remove("ns", "xla", xlaKey(i))
				case 3:
					want := xlaEntry(i)
					want["xla_flags"] = "--new"
					if ex := x.Explain("ns", "xla", want); ex.Reason != ReasonNoEntries && (len(ex.Nearest) == 0 || len(ex.Nearest[0].Diffs) == 0 || ex.Compared == 0) {
						t.Errorf("explanation %+v", ex)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := x.Len("ns", "xla"); n == 0 || n > 3000 || n != x.Entries() {
		t.Fatalf("len %d, entries %d", n, x.Entries())
	}
}

// TestKindsAreNotCompared: a miss is compared only with entries of its own
// kind (KindComponent), by the index and by Explain alike; with none of its
// kind it is the first compile of its kind, not a difference from another
// kind's entry (a torch C++ library's miss was explained by an FX graph).
func TestKindsAreNotCompared(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	fx := map[string]string{"cache": "fxgraph", "device": "cpu", "torch_version": "2"}
	cpp1 := map[string]string{"cache": "cpp", "device": "cuda", "torch_version": "1"}
	want := map[string]string{"cache": "cpp", "device": "cpu", "torch_version": "2"}

	x := NewIndex(IndexConfig{})
	x.Add("ns", "pt2", "fx1", "fx-graph-v1:a", t0, fx)
	cands := []Candidate{{Key: "fx1", Name: "fx-graph-v1:a", Created: t0, Components: fx}}
	for _, ex := range []Explanation{x.Explain("ns", "pt2", want), Explain(want, cands)} {
		if ex.Reason != ReasonNoEntries || len(ex.Nearest) != 0 || !strings.Contains(ex.Summary, `torch cache kind "cpp"`) {
			t.Fatalf("only an FX graph stored: %+v", ex)
		}
	}

	// A C++ entry two components away is nearer than an FX graph one away.
	x.Add("ns", "pt2", "cpp1", "c1.so", t0.Add(time.Second), cpp1)
	cands = append(cands, Candidate{Key: "cpp1", Name: "c1.so", Created: t0.Add(time.Second), Components: cpp1})
	for _, ex := range []Explanation{x.Explain("ns", "pt2", want), Explain(want, cands)} {
		if ex.Reason != "device+torch_version" || len(ex.Nearest) != 1 || ex.Nearest[0].Key != "cpp1" || ex.Compared != 1 {
			t.Fatalf("with a C++ entry: %+v", ex)
		}
	}
	if n := x.Len("ns", "pt2"); n != 2 {
		t.Fatalf("Len = %d, want 2 (both kinds)", n)
	}
	x.Remove("ns", "pt2", "cpp1")
	if ex := x.Explain("ns", "pt2", want); ex.Reason != ReasonNoEntries {
		t.Fatalf("after removing the C++ entry: %+v", ex)
	}
	// A C++ library of the same components: nothing to compare, and the
	// summary says the key covers what they do not show (it blamed a
	// different plugin version, the usual case of every torch C++ miss).
	cpp2 := map[string]string{"cache": "cpp", "device": "cpu", "torch_version": "2"}
	x.Add("ns", "pt2", "cpp2", "c2.so", t0.Add(2*time.Second), cpp2)
	if ex := x.Explain("ns", "pt2", want); ex.Reason != ReasonNotComparable || !strings.Contains(ex.Summary, "C++ library's key is its sources") {
		t.Fatalf("same components: %+v", ex)
	}
	// Entries without the kind component keep one group, as before.
	if ex := x.Explain("ns", "xla", map[string]string{"module": "m"}); ex.Reason != ReasonNoEntries || strings.Contains(ex.Summary, "kind") {
		t.Fatalf("empty backend: %+v", ex)
	}
}
