package api_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
)

// panickyStore panics on a Stat of one key, and in the middle of reading
// another, as a bug in a storage tier would.
type panickyStore struct {
	api.Store
	key, readKey cachekey.Key
}

func (p panickyStore) Stat(ctx context.Context, ns string, key cachekey.Key) (store.Meta, error) {
	if key == p.key {
		panic("bug in a storage tier")
	}
	return p.Store.Stat(ctx, ns, key)
}

func (p panickyStore) Get(ctx context.Context, ns string, key cachekey.Key, off, n int64) (store.Meta, io.ReadCloser, error) {
	m, rc, err := p.Store.Get(ctx, ns, key, off, n)
	if err == nil && key == p.readKey {
		rc = &panicAfter{rc: rc, left: 100 << 10}
	}
	return m, rc, err
}

// panicAfter reads left bytes of rc, then panics. It hides rc's WriteTo,
// so that a copy goes through Read.
type panicAfter struct {
	rc   io.ReadCloser
	left int
}

func (p *panicAfter) Read(b []byte) (int, error) {
	if p.left <= 0 {
		panic("bug in a storage tier's reader")
	}
	n, err := p.rc.Read(b[:min(len(b), p.left)])
	p.left -= n
	return n, err
}

func (p *panicAfter) Close() error { return p.rc.Close() }

// TestStreamedBodyPanicAbortsOnlyItsResponse: a panic while a response
// body streams, after its handler returned (an entry, a batch, an export),
// cuts that response short, is counted, and the server keeps serving.
func TestStreamedBodyPanicAbortsOnlyItsResponse(t *testing.T) {
	bad := cachekey.Key{7, 7, 7}
	srv := apitest.Start(t, apitest.Options{
		API: func(c *api.Config) { c.Store = panickyStore{Store: c.Store, readKey: bad} },
	})
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB: streamed, not sent from memory
	resp := srv.Do(http.MethodPut, srv.EntryURL("default", bad.String()), bytes.NewReader(data))
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT = %d", resp.StatusCode)
	}
	for i, tc := range []struct {
		name, method, url, body string
	}{
		{"entry", http.MethodGet, srv.EntryURL("default", bad.String()), ""},
		{"batch", http.MethodPost, srv.URL + "/v1/default/batch", `{"keys":["` + bad.String() + `"]}`},
		{"export", http.MethodGet, srv.URL + "/v1/default/export", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			resp := srv.Do(tc.method, tc.url, body, "Content-Type", "application/json")
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || err == nil {
				t.Errorf("%s whose store reader panics mid-body = %d, read %d bytes, err %v; want 200 cut short", tc.name, resp.StatusCode, n, err)
			}
			if got := srv.Metric("cachesvc_http_handler_panics_total"); got != float64(i+1) {
				t.Errorf("cachesvc_http_handler_panics_total = %v, want %d", got, i+1)
			}
			resp = srv.Do(http.MethodGet, srv.URL+"/healthz", nil)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("healthz after the panic = %d", resp.StatusCode)
			}
		})
	}
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
