package api_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
)

// panickyStore panics on a Stat of one key, as a bug in a storage tier
// would.
type panickyStore struct {
	api.Store
	key cachekey.Key
}

func (p panickyStore) Stat(ctx context.Context, ns string, key cachekey.Key) (store.Meta, error) {
	if key == p.key {
		panic("bug in a storage tier")
	}
	return p.Store.Stat(ctx, ns, key)
}

// TestHandlerPanicIsOneRequests500: a panic in a handler (here from the
// store under it) answers that request 500 internal_error, is logged with
// its stack and the entry it was about, is counted, and the server keeps
// serving.
func TestHandlerPanicIsOneRequests500(t *testing.T) {
	bad := cachekey.Key{1, 2, 3}
	var logs syncBuffer
	srv := apitest.Start(t, apitest.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		API:    func(c *api.Config) { c.Store = panickyStore{Store: c.Store, key: bad} },
	})
	resp := srv.Do(http.MethodHead, srv.EntryURL("default", bad.String()), nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("HEAD of the key whose Stat panics = %d, want 500", resp.StatusCode)
	}
	resp = srv.Do(http.MethodGet, srv.EntryURL("default", bad.String())+"/meta", nil)
	if body := apitest.ReadAll(t, resp); resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "internal_error") {
		t.Fatalf("GET meta of the key whose Stat panics = %d %s, want 500 internal_error", resp.StatusCode, body)
	}
	// Still serving, other keys included.
	good := cachekey.Key{4, 5, 6}
	resp = srv.Do(http.MethodPut, srv.EntryURL("default", good.String()), strings.NewReader("still here"))
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT after the panics = %d, want 201", resp.StatusCode)
	}
	if got := srv.Metric("cachesvc_http_handler_panics_total"); got < 1 {
		t.Errorf("cachesvc_http_handler_panics_total = %v, want at least 1", got)
	}
	for _, want := range []string{"handler panicked; answered 500", "panic=\"bug in a storage tier\"", "namespace=default", "key=" + bad.String(), "panic_test.go"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
}
