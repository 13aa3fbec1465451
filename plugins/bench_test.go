package plugins

import (
	"context"
	"testing"
)

// BenchmarkEmptyPluginCall measures the host's per-call overhead: the empty
// plugin returns its input, so the time is alloc + copy in + canonicalize +
// result JSON + copy out, on a pooled instance. Target: ≤ 20 µs.
func BenchmarkEmptyPluginCall(b *testing.B) { benchEmptyCall(b, false) }

// BenchmarkEmptyPluginCallWazeroChecks is BenchmarkEmptyPluginCall under
// wazero's close-on-context-done (Config.WazeroInterrupt), for comparison.
func BenchmarkEmptyPluginCallWazeroChecks(b *testing.B) { benchEmptyCall(b, true) }

func benchEmptyCall(b *testing.B, wazeroInterrupt bool) {
	h := newTestHost(b, Config{PoolSize: 1, WazeroInterrupt: wazeroInterrupt}, "empty")
	p := mustPlugin(b, h, "empty")
	sig := []byte(`{"backend":"empty","key":"jit_f-0123456789abcdef"}`)
	ctx := context.Background()
	if _, err := p.Canonicalize(ctx, sig); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Canonicalize(ctx, sig); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPassthroughCall is a realistic small plugin (encoding/json inside).
func BenchmarkPassthroughCall(b *testing.B) {
	h := newTestHost(b, Config{PoolSize: 1}, "builtin")
	p := mustPlugin(b, h, "passthrough")
	sig := []byte(`{"backend":"passthrough","kind":"jax","key":"jit_f-0123456789abcdef0123456789abcdef"}`)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Canonicalize(ctx, sig); err != nil {
			b.Fatal(err)
		}
	}
}
