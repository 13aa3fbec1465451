package client_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/client"
)

// TestServerWarningLoggedOnce: a server that ignored part of a request (a
// field it does not know, as an older server does with a newer client's
// body) says so in a Warning header; the client logs each distinct warning
// once, however many answers carry it. A proxy in front of a real server
// adds a field to every JSON body, as a newer client would.
func TestServerWarningLoggedOnce(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	target, _ := url.Parse(srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	director := proxy.Director
	proxy.Director = func(r *http.Request) {
		director(r)
		if r.Header.Get("Content-Type") != "application/json" {
			return
		}
		body, _ := io.ReadAll(r.Body)
		body = append([]byte(`{"future_field":1,`), bytes.TrimPrefix(body, []byte("{"))...)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	}
	front := httptest.NewServer(proxy)
	defer front.Close()

	var logs bytes.Buffer
	c, err := client.New(client.Config{BaseURL: front.URL, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := strings.Repeat("ab", 32)
	for i := range 3 {
		post := c.AcquireLease
		if i > 0 {
			post = c.RenewLease // the holder's own: granted
		}
		if _, granted, err := post(ctx, "default", key, "host:1", time.Minute); err != nil || !granted {
			t.Fatalf("lease request %d: granted %v, %v", i, granted, err)
		}
	}
	if _, _, err := c.Exists(ctx, "default", []string{key}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	want := `level=WARN msg="the server ignored part of a request" warning="unknown field \"future_field\" ignored" method=POST path=/v1/default/leases/` + key
	if len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Fatalf("logged:\n%s\nwant one line containing\n%s", logs.String(), want)
	}
}
