package jaxsync_test

import (
	"context"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/plugins/pluginstest"
)

// startServer starts a real server with the built-in plugins, so that
// POST /v1/{ns}/keys works (the agent computes passthrough keys with it).
func startServer(t *testing.T) *apitest.Server {
	t.Helper()
	ctx := context.Background()
	h, err := plugins.NewHost(ctx, plugins.Config{CacheDir: pluginstest.CacheDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	if err := h.LoadBuiltins(ctx); err != nil {
		t.Fatal(err)
	}
	k, err := keying.New(keying.Config{Host: h})
	if err != nil {
		t.Fatal(err)
	}
	return apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Keyer = k }})
}
