package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/plugins/pluginstest"
)

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// builtinKeyer returns a keyer over a plugin host with the built-in
// plugins loaded (closed at the end of tb), and the host; observe, when
// not nil, is the host's plugin-call observer.
func builtinKeyer(tb testing.TB, observe func(plugin string, d time.Duration, err error)) (*keying.Keyer, *plugins.Host) {
	tb.Helper()
	ctx := context.Background()
	h, err := plugins.NewHost(ctx, plugins.Config{CacheDir: pluginstest.CacheDir(tb), Observe: observe})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close(context.Background()) })
	if err := h.LoadBuiltins(ctx); err != nil {
		tb.Fatal(err)
	}
	k, err := keying.New(keying.Config{Host: h})
	if err != nil {
		tb.Fatal(err)
	}
	return k, h
}
