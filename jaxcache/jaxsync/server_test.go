package jaxsync_test

import (
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
)

// startServer starts a real server with the built-in plugins, so that
// POST /v1/{ns}/keys works (the agent computes passthrough keys with it).
func startServer(t *testing.T) *apitest.Server {
	t.Helper()
	k := keyingtest.Keyer(t, plugins.Config{}, keying.Config{})
	return apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Keyer = k }})
}
