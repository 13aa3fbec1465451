package client_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/client"
)

// TestJSONBodiesKnownToStrictServers: every JSON body the client sends
// has only fields that servers refusing unknown ones know (servers before
// the unknown-field policy refused them all, as ?field_validation=strict
// does now), and the client never asks for strict itself. A proxy in
// front of a real server adds ?field_validation=strict to every request,
// so that a field the server does not know fails the call.
func TestJSONBodiesKnownToStrictServers(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	target, _ := url.Parse(srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	director := proxy.Director
	var asked atomic.Int64 // requests that named field_validation themselves
	proxy.Director = func(r *http.Request) {
		director(r)
		q := r.URL.Query()
		if q.Has("field_validation") {
			asked.Add(1)
		}
		q.Set("field_validation", "strict")
		r.URL.RawQuery = q.Encode()
	}
	front := httptest.NewServer(proxy)
	defer front.Close()
	c, err := client.New(client.Config{BaseURL: front.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key, exe := strings.Repeat("e", 64), []byte("executable")
	calls := []struct {
		name string
		call func() error
	}{
		{"AcquireLease", func() error { _, _, err := c.AcquireLease(ctx, "default", key, "host:1", time.Minute); return err }},
		{"RenewLease", func() error { _, _, err := c.RenewLease(ctx, "default", key, "host:1", time.Minute); return err }},
		{"ReleaseLease", func() error { return c.ReleaseLease(ctx, "default", key, "host:1") }},
		{"Put", func() error {
			_, err := c.Put(ctx, "default", key, bytes.NewReader(exe), client.PutOptions{Size: int64(len(exe))})
			return err
		}},
		{"Exists", func() error { _, _, err := c.Exists(ctx, "default", []string{key}); return err }},
		{"Batch", func() error {
			_, err := c.Batch(ctx, "default", []string{key}, func(client.Member, io.Reader) error { return nil })
			return err
		}},
		{"Quarantine", func() error { _, err := c.Quarantine(ctx, "default", key, "test"); return err }},
		{"Restore", func() error { _, err := c.Restore(ctx, "default", key); return err }},
	}
	for _, tt := range calls {
		if err := tt.call(); err != nil {
			t.Errorf("%s through a strict server: %v", tt.name, err)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("%d requests named ?field_validation= themselves; the client must not unless a caller asks", n)
	}
}
