package api

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/wire"
)

// FuzzRequestHeaders feeds arbitrary header bytes through the request
// parser. What it accepts is counted as a miss, a write and a hit, as the
// handlers would, and /metrics (the registry's Gather) must then still
// succeed with every label valid UTF-8; what it refuses is a 400 naming the
// header.
func FuzzRequestHeaders(f *testing.F) {
	f.Add("xla", "jit_step", "sweep-1.arm-a", "42.5", strings.Repeat("ab", 32))
	f.Add("\xff", "\xff", "\xff", "1e308", "")
	f.Add("passthrough", "naïve name ✓", "r@1:x", "604800", "zz")
	f.Add("", "a\x00b", "", "-0", "")
	st, err := stats.Open(stats.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	cnt, err := newCounter(st, nil, reg)
	if err != nil {
		f.Fatal(err)
	}
	reg.MustRegister(&statsCollector{st: st})
	f.Fuzz(func(t *testing.T, backend, name, run, secs, sha string) {
		h := map[string]string{wire.HeaderBackend: backend, wire.HeaderName: name, wire.HeaderRun: run,
			wire.HeaderCompileSeconds: secs, wire.HeaderContentSHA256: sha}
		var r request
		if err := r.readHeaders(func(k string) string { return h[k] }); err != nil {
			e, ok := err.(*Error)
			if !ok || e.Status != 400 || !strings.Contains(e.Message, "X-C") {
				t.Fatalf("refusal is not a 400 naming the header: %#v", err)
			}
			return
		}
		for _, s := range []string{r.Backend, r.Name, r.Run} {
			if !utf8.ValidString(s) {
				t.Fatalf("accepted a value that is not UTF-8: %q", s)
			}
		}
		if r.CompileSeconds < 0 || r.CompileSeconds > wire.MaxCompileSeconds {
			t.Fatalf("accepted compile seconds %v", r.CompileSeconds)
		}
		cnt.Lookup(Lookup{Route: RouteEntries, Namespace: "default", Backend: r.Backend, Run: r.Run, Name: r.Name})
		cnt.Write(Write{Result: WriteCreated, Namespace: "default", Backend: r.Backend, Run: r.Run, Name: r.Name,
			CompileSeconds: r.CompileSeconds, Bytes: 1})
		cnt.Lookup(Lookup{Route: RouteEntries, Namespace: "default", Backend: r.Backend, Run: r.Run, Name: r.Name,
			Hit: true, CompileSeconds: r.CompileSeconds, Bytes: 1})
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("/metrics would fail: %v", err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if !utf8.ValidString(l.GetValue()) {
						t.Fatalf("label %s=%q is not UTF-8", l.GetName(), l.GetValue())
					}
				}
				if c := m.GetCounter(); c != nil && c.GetValue() < 0 {
					t.Fatalf("counter %s is negative: %v", mf.GetName(), c.GetValue())
				}
			}
		}
	})
}
