// Command precompile fills a wazero compilation cache with the built-in
// plugins and any extra modules named on the command line, through
// plugins.Host.Precompile: the instrumented bytes a default Host compiles,
// and the original bytes a Host with Config.WazeroInterrupt compiles (tests
// run both).
//
//	go run ./plugins/internal/precompile -cache DIR [FILE.wasm ...]
//
// Tests built with -race run it (without -race) through pluginstest, because
// wazero's compiler is very slow under the race detector while loading from
// the cache is not.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/cachesvc/cachesvc/plugins"
)

func main() {
	cache := flag.String("cache", "", "compilation cache directory (required)")
	flag.Parse()
	if err := run(*cache, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "precompile:", err)
		os.Exit(1)
	}
}

func run(cache string, files []string) error {
	if cache == "" {
		return fmt.Errorf("-cache is required")
	}
	ctx := context.Background()
	mods, names := plugins.Builtins()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		mods[f] = b
		names = append(names, f)
	}
	for _, wazeroInterrupt := range []bool{false, true} {
		h, err := plugins.NewHost(ctx, plugins.Config{CacheDir: cache, PoolSize: 1, WazeroInterrupt: wazeroInterrupt})
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := h.Precompile(ctx, mods[n]); err != nil {
				h.Close(ctx)
				return fmt.Errorf("precompile %s: %w", n, err)
			}
		}
		if err := h.Close(ctx); err != nil {
			return err
		}
	}
	return nil
}
