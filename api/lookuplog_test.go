package api_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/wire"
)

// TestSignatureRoutesLogKey: the request line of a lookup or keys request
// by signature names the key the plugin computed, as a GET or PUT by key
// names its route's {key}, so an operator can follow a program from its
// miss to its upload and hits (the lines named the namespace only).
func TestSignatureRoutesLogKey(t *testing.T) {
	keyer, _ := builtinKeyer(t, nil)
	var logs syncBuffer
	srv := apitest.Start(t, apitest.Options{
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		API:    func(c *api.Config) { c.Keyer = keyer },
	})
	sig := []byte(`{"backend":"passthrough","kind":"jax","key":"jit_logged-0123abcd"}`)
	post := func(route string) (int, string) {
		t.Helper()
		resp := srv.Do(http.MethodPost, srv.URL+"/v1/default/"+route, bytes.NewReader(sig))
		body := apitest.ReadAll(t, resp)
		var k struct{ Key string }
		_ = json.Unmarshal(body, &k)
		if k.Key == "" {
			k.Key = resp.Header.Get(wire.HeaderKey)
		}
		return resp.StatusCode, k.Key
	}
	status, key := post("lookup")
	if status != http.StatusNotFound || len(key) != 64 {
		t.Fatalf("first lookup: status %d, key %q; want a 404 miss naming the key", status, key)
	}
	if resp, body := put(t, srv, "default", key, 1, 100); resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %d %s", resp.StatusCode, body)
	}
	if status, _ := post("lookup"); status != http.StatusOK {
		t.Fatalf("second lookup: status %d, want a hit", status)
	}
	if status, _ := post("keys"); status != http.StatusOK {
		t.Fatalf("keys: status %d", status)
	}
	want := map[string]int{"/v1/:ns/lookup 404": 0, "/v1/:ns/lookup 200": 0, "/v1/:ns/keys 200": 0}
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec struct {
			Msg, Route, Namespace, Key string
			Status                     int
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "request" || !strings.HasPrefix(rec.Route, "/v1/:ns/") ||
			(!strings.HasSuffix(rec.Route, "/lookup") && !strings.HasSuffix(rec.Route, "/keys")) || rec.Status == http.StatusPreconditionRequired {
			continue
		}
		id := rec.Route + " " + strconv.Itoa(rec.Status)
		if rec.Namespace != "default" || rec.Key != key {
			t.Errorf("%s logged namespace %q, key %q; want default, %s:\n%s", id, rec.Namespace, rec.Key, key, line)
		}
		want[id]++
	}
	for id, n := range want {
		if n == 0 {
			t.Errorf("no request line for %s in\n%s", id, logs.String())
		}
	}
}
