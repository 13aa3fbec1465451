package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
)

// TestLookupNeedsSignature: -mode lookup without -signature says how to
// make one (it said "read -signature: open : no such file or directory").
func TestLookupNeedsSignature(t *testing.T) {
	_, err := runLookup(context.Background(), config{target: "cachesvc", mode: "lookup", conc: 1, entries: 1})
	if err == nil || !strings.Contains(err.Error(), "go run ./scripts/bench/gensig") {
		t.Fatalf("runLookup without -signature: %v; want an error naming gensig", err)
	}
}

// TestLookupMissSaysWhy: a lookup that misses (no entry under the
// signature's key) is an error that says the benchmark measures hits and
// how to store the entry; it was a bare "lookup: 404 Not Found".
func TestLookupMissSaysWhy(t *testing.T) {
	k := keyingtest.Keyer(t, plugins.Config{}, keying.Config{})
	srv := apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Keyer = k }})
	sig := []byte(`{"backend":"passthrough","kind":"jax","key":"jit_f-0a1b"}`)
	_, err := lookupOp(context.Background(), http.DefaultClient, config{base: srv.URL, ns: "bench"}, lookup{sig: sig})
	if err == nil || !strings.Contains(err.Error(), "PUT an entry") {
		t.Fatalf("lookup miss: %v; want an error saying to store the entry first", err)
	}
}
