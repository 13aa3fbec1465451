package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/client"
)

// TestGoClientLongPollThroughProxyReadTimeout: behind README's nginx block
// with proxy_read_timeout cut to 3 s, the Go client's Get with a 20 s wait
// outlives the proxy: it polls in slices, learns the cut from nginx's 504
// and continues with &waited=, and the server counts one miss and (when
// the entry comes) one wait hit. A lease released without the entry ends
// the wait with 404 not_found.
func TestGoClientLongPollThroughProxyReadTimeout(t *testing.T) {
	nginxPath(t)
	pki := authtest.NewPKI(t)
	backend := startServe(t)
	proxy := "https://" + startNginx(t, strings.TrimPrefix(backend, "http://"), pki,
		[2]string{"proxy_read_timeout 330s;", "proxy_read_timeout 3s;"})
	tests := []struct {
		name  string
		write bool // the holder writes the entry after 7 s; else it releases its lease after 5 s
		// wantHits is the hits (and wait hits) counted; code, the miss's code.
		wantHits int64
		code     string
	}{
		{"the entry comes after two cuts", true, 1, ""},
		{"the lease ends without it", false, 0, "not_found"},
	}
	ctx := context.Background()
	holder, err := client.New(client.Config{BaseURL: backend})
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			waiter, err := client.New(client.Config{BaseURL: proxy + "/cachesvc", TLS: &tls.Config{RootCAs: pki.Pool}})
			if err != nil {
				t.Fatal(err)
			}
			key := strings.Repeat(string(rune('d'+i))+"0", 32)
			before := serverStats(t, backend).Totals
			if _, err := waiter.Get(ctx, "default", key, 0); !client.IsNotFound(err) {
				t.Fatalf("first lookup: %v, want a 404 miss", err)
			}
			if _, ok, err := holder.AcquireLease(ctx, "default", key, "holder", time.Minute); err != nil || !ok {
				t.Fatalf("acquire: %v %v", ok, err)
			}
			go func() {
				if tt.write {
					time.Sleep(7 * time.Second)
					body := []byte("executable")
					_, _ = holder.Put(ctx, "default", key, bytes.NewReader(body), client.PutOptions{Size: int64(len(body)), CompileSeconds: 100})
				} else {
					time.Sleep(5 * time.Second)
					_ = holder.ReleaseLease(ctx, "default", key, "holder")
				}
			}()
			resp, err := waiter.Get(ctx, "default", key, 20*time.Second)
			var ce *client.Error
			switch {
			case tt.write && err != nil:
				t.Fatalf("Get with a 20 s wait through a 3 s proxy timeout: %v", err)
			case tt.write:
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != "executable" {
					t.Fatalf("got %q", b)
				}
			case err == nil:
				resp.Body.Close()
				t.Fatal("the wait got an entry nobody wrote")
			case !asClientError(err, &ce) || ce.Code != tt.code:
				t.Fatalf("the wait ended with %v, want 404 %s", err, tt.code)
			}
			after := serverStats(t, backend).Totals
			got := [3]int64{after.Misses - before.Misses, after.Hits - before.Hits, after.WaitHits - before.WaitHits}
			if want := [3]int64{1, tt.wantHits, tt.wantHits}; got != want {
				t.Errorf("misses, hits, wait hits counted = %v, want %v", got, want)
			}
		})
	}
}

func asClientError(err error, target **client.Error) bool {
	e, ok := err.(*client.Error)
	if ok {
		*target = e
	}
	return ok
}
