// Package apitest starts a real cachesvc API server for integration tests: a
// real listener on 127.0.0.1:0 and a real Badger store in t.TempDir().
//
//	srv := apitest.Start(t, apitest.Options{})
//	resp, err := http.Get(srv.URL + "/healthz")
//
// The server is shut down and its store closed when the test ends.
package apitest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/store"
)

// Options configures Start. The zero value starts a server with an unlimited
// store in a fresh temporary directory.
type Options struct {
	// Dir is the Badger directory; empty means a new t.TempDir().
	Dir string
	// MaxBytes and MaxEntryBytes are passed to the store (and MaxEntryBytes
	// to the API as well); 0 means unlimited.
	MaxBytes      int64
	MaxEntryBytes int64
	// Store, if set, adjusts the store configuration before it is opened.
	Store func(*store.Config)
	// API, if set, adjusts the API configuration before the server is
	// created: set Keyer, Stats, Auth and the like here.
	API func(*api.Config)
	// Logger receives server and store logs; nil discards them unless the
	// environment sets CACHESVC_TEST_LOG=1, which logs to stderr.
	Logger *slog.Logger
	// Listen is the TCP address to serve on; empty means "127.0.0.1:0".
	// "[::]:0" serves IPv6 and (dual-stack) IPv4 clients on every address.
	Listen string
}

// Server is a running test server.
type Server struct {
	// URL is the base URL, e.g. "http://127.0.0.1:41234", without a slash.
	URL string
	// Dir is the Badger directory.
	Dir string
	// Store is the open store; it changes on Restart.
	Store *store.Badger
	// API is the server; it changes on Restart.
	API *api.Server
	// Registry is the Prometheus registry /metrics serves.
	Registry *prometheus.Registry

	t      testing.TB
	opts   Options
	done   chan error
	closed bool
}

// Start opens a store and serves the API on 127.0.0.1:0 (Options.Listen). It fails the test
// on error and registers Close with t.Cleanup.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Logger == nil {
		if os.Getenv("CACHESVC_TEST_LOG") == "1" {
			opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		} else {
			opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		}
	}
	s := &Server{t: t, opts: opts, Dir: opts.Dir, closed: true}
	s.start()
	t.Cleanup(s.Close)
	return s
}

// start opens the store and serves; the Server must be closed.
func (s *Server) start() {
	s.t.Helper()
	scfg := store.Config{
		Dir:           s.opts.Dir,
		MaxBytes:      s.opts.MaxBytes,
		MaxEntryBytes: s.opts.MaxEntryBytes,
		Logger:        s.opts.Logger,
	}
	if s.opts.Store != nil {
		s.opts.Store(&scfg)
	}
	st, err := store.Open(scfg)
	if err != nil {
		s.t.Fatalf("apitest: open store: %v", err)
	}
	acfg := api.Config{
		Store:         st,
		Logger:        s.opts.Logger,
		MaxEntryBytes: s.opts.MaxEntryBytes,
		Registry:      prometheus.NewRegistry(),
	}
	if s.opts.API != nil {
		s.opts.API(&acfg)
	}
	srv, err := api.New(acfg)
	if err != nil {
		_ = st.Close()
		s.t.Fatalf("apitest: new server: %v", err)
	}
	listen := s.opts.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		_ = st.Close()
		s.t.Fatalf("apitest: listen: %v", err)
	}
	s.Store, s.API, s.Registry = st, srv, acfg.Registry
	s.URL = "http://" + ln.Addr().String()
	s.done = make(chan error, 1)
	go func() { s.done <- srv.Serve(ln) }()
	s.closed = false
}

// Close shuts the server down (10 s grace) and closes the store. It is
// idempotent.
func (s *Server) Close() {
	if s.closed {
		return
	}
	s.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.API.Shutdown(ctx); err != nil {
		s.t.Errorf("apitest: shutdown: %v", err)
	}
	<-s.done
	if err := s.Store.Close(); err != nil {
		s.t.Errorf("apitest: close store: %v", err)
	}
}

// Restart closes the server and starts a new one on the same directory
// (and a new port).
func (s *Server) Restart() {
	s.t.Helper()
	s.Close()
	s.start()
}

// EntryURL returns the URL of entry key in namespace ns.
func (s *Server) EntryURL(ns, key string) string {
	return fmt.Sprintf("%s/v1/%s/entries/%s", s.URL, ns, key)
}

// Do sends a request with the given body and headers (pairs of name, value)
// and returns the response; the caller closes its body. A body of nil sends
// none; a *strings.Reader, *bytes.Reader or *bytes.Buffer gets a
// Content-Length, any other reader is sent chunked.
func (s *Server) Do(method, url string, body io.Reader, headers ...string) *http.Response {
	s.t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		s.t.Fatalf("apitest: new request: %v", err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("apitest: %s %s: %v", method, url, err)
	}
	return resp
}

// ReadAll reads and closes resp's body.
func ReadAll(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("apitest: read body: %v", err)
	}
	return b
}

// Metric scrapes /metrics and returns the value of the sample whose line
// starts with series (e.g. `cachesvc_lookups_total{result="hit"}`), or -1 if
// absent.
func (s *Server) Metric(series string) float64 {
	s.t.Helper()
	resp := s.Do(http.MethodGet, s.URL+"/metrics", nil)
	for _, line := range strings.Split(string(ReadAll(s.t, resp)), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v
			}
		}
	}
	return -1
}
