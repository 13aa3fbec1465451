package s3_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// stuckListener returns the address of a listener that accepts
// connections and never answers on them (a hung gateway, or a server
// process stopped behind its live socket).
func stuckListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestServerHung: a server that accepts connections and never answers
// fails every operation with ErrUnavailable once the HTTP client's
// response-header timeout passes, as a stopped server does, and works
// again once it answers. net/http's timeout error matches
// context.DeadlineExceeded (errors.Is), and the store took it for the
// caller's own deadline: the error went unclassified, and a replica
// answered 500 internal_error (after minio's three one-minute tries)
// instead of 503 shared_tier_unavailable.
func TestServerHung(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	stuck := stuckListener(t)
	var hung atomic.Bool
	var dialer net.Dialer
	cfg := config(srv, bucket)
	cfg.Transport = &http.Transport{
		DisableKeepAlives:     true, // each request dials: none reuses a live connection
		ResponseHeaderTimeout: time.Second,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if hung.Load() {
				addr = stuck
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}
	s := open(t, cfg)
	defer s.Close()
	ctx := context.Background()
	key := storetest.KeyOf("hung")
	if _, err := s.Put(ctx, "default", key, strings.NewReader("hello"), store.PutOptions{Size: -1}); err != nil {
		t.Fatal(err)
	}
	hung.Store(true)
	for _, op := range []struct {
		name string
		fn   func() error
	}{
		{"Put", func() error {
			_, err := s.Put(ctx, "default", storetest.KeyOf("new"), strings.NewReader("x"), store.PutOptions{Size: -1})
			return err
		}},
		{"Get", func() error { _, _, err := s.Get(ctx, "default", key, 0, -1); return err }},
		{"Stat", func() error { _, err := s.Stat(ctx, "default", key); return err }},
		{"Delete", func() error { return s.Delete(ctx, "default", key) }},
		{"Walk", func() error { return s.Walk(ctx, "", func(store.Meta) bool { return true }) }},
	} {
		if err := op.fn(); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the server hung = %v, want ErrUnavailable", op.name, err)
		} else if !strings.Contains(err.Error(), "s3://"+bucket+"/") {
			t.Errorf("%s error %q does not name the object", op.name, err)
		}
	}
	hung.Store(false)
	if _, err := s.Stat(ctx, "default", key); err != nil {
		t.Fatalf("Stat once the server answers again: %v", err)
	}
}

// The caller's own context still ends an operation as the caller's, not
// as an outage: a canceled or expired context is not ErrUnavailable.
func TestCallerContextNotAnOutage(t *testing.T) {
	srv := s3test.Start(t)
	s := open(t, config(srv, srv.NewBucket(t)))
	defer s.Close()
	key := storetest.KeyOf("caller")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"canceled", canceled, context.Canceled},
		{"deadline passed", expired, context.DeadlineExceeded},
	} {
		_, err := s.Stat(tc.ctx, "default", key)
		if !errors.Is(err, tc.want) || errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Stat with a %s context = %v, want %v and not ErrUnavailable", tc.name, err, tc.want)
		}
	}
}
