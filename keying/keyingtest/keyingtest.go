// Package keyingtest builds real Keyers for tests in other packages: a wazero
// host with the embedded built-ins and any extra plugin files, compiled
// through the shared test compilation cache.
package keyingtest

import (
	"context"
	"os"
	"testing"

	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/plugins/pluginstest"
)

// Keyer returns a Keyer over the built-in plugins plus the plugin files
// named by wasmFiles. hcfg and kcfg are used as given, except that the host's
// CacheDir and the Keyer's Host are set here. The host closes when t ends.
func Keyer(t testing.TB, hcfg plugins.Config, kcfg keying.Config, wasmFiles ...string) *keying.Keyer {
	t.Helper()
	ctx := context.Background()
	hcfg.CacheDir = pluginstest.CacheDir(t, wasmFiles...)
	h, err := plugins.NewHost(ctx, hcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	if err := h.LoadBuiltins(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range wasmFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Load(ctx, f, b); err != nil {
			t.Fatal(err)
		}
	}
	kcfg.Host = h
	k, err := keying.New(kcfg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
