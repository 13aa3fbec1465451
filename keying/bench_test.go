package keying

import (
	"context"
	"testing"

	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/plugins/builtin/xla/xlacanon"
)

// benchKey measures the whole key path (signature digest, backend, plugin
// call through wazero, key hash) with the memo off, so that every
// iteration runs the xla plugin.
// wazeroChecks (optional) runs the plugin under wazero's close-on-context-
// done instead of the host's instrumented stop flag, for comparison.
func benchKey(b *testing.B, size int, memo int, wazeroChecks ...bool) {
	k := newTestKeyer(b, plugins.Config{PoolSize: 1, WazeroInterrupt: len(wazeroChecks) > 0 && wazeroChecks[0]}, Config{MemoEntries: memo})
	sig := xlacanon.GenerateSignature(size)
	ctx := context.Background()
	if _, err := k.Key(ctx, sig); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(sig)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := k.Key(ctx, sig); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeyXLA1MiB keys a 1 MiB module through the xla plugin.
func BenchmarkKeyXLA1MiB(b *testing.B) { benchKey(b, 1<<20, -1) }

// BenchmarkKeyXLA10MiB keys a 10 MiB module through the xla plugin.
func BenchmarkKeyXLA10MiB(b *testing.B) { benchKey(b, 10<<20, -1) }

// BenchmarkKeyXLA1MiBWazeroChecks is BenchmarkKeyXLA1MiB with the plugin
// stopped by wazero's per-loop checks (plugins.Config.WazeroInterrupt), the
// baseline for the instrumented stop flag.
func BenchmarkKeyXLA1MiBWazeroChecks(b *testing.B) { benchKey(b, 1<<20, -1, true) }

// BenchmarkKeyXLA10MiBWazeroChecks is BenchmarkKeyXLA10MiB with
// plugins.Config.WazeroInterrupt.
func BenchmarkKeyXLA10MiBWazeroChecks(b *testing.B) { benchKey(b, 10<<20, -1, true) }

// BenchmarkKeyXLA10MiBMemo is a repeated 10 MiB lookup answered by the memo
// (signature digest only; the plugin is skipped).
func BenchmarkKeyXLA10MiBMemo(b *testing.B) { benchKey(b, 10<<20, 0) }

// BenchmarkBackendOf10MiB is the cost of finding the backend field.
func BenchmarkBackendOf10MiB(b *testing.B) {
	sig := xlacanon.GenerateSignature(10 << 20)
	b.SetBytes(int64(len(sig)))
	for i := 0; i < b.N; i++ {
		if _, err := backendOf(sig); err != nil {
			b.Fatal(err)
		}
	}
}
