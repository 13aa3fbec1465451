package api_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/auth/authtest"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// TestWaitEndsWhenTheClientLeaves: a GET ?wait=300s whose client closes or
// resets its connection gives its place in the waiter table back within
// seconds, not when the 300 s run out, counts no lookup (neither hit nor
// miss), and leaves the holder's lease alone. It holds beneath TLS and the
// --min-transfer-rate pacing wrapper too.
func TestWaitEndsWhenTheClientLeaves(t *testing.T) {
	pki := authtest.NewPKI(t)
	tlsCfg, err := auth.TLSFiles{Cert: pki.ServerCert, Key: pki.ServerKey}.Config()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		tls   bool
		paced bool
		leave func(net.Conn)
	}{
		{"the client closes", false, false, func(c net.Conn) { c.Close() }},
		{"the client resets", false, false, func(c net.Conn) { c.(*net.TCPConn).SetLinger(0); c.Close() }},
		{"the client closes, paced", false, true, func(c net.Conn) { c.Close() }},
		{"the TLS client's socket closes", true, false, func(c net.Conn) { c.(*tls.Conn).NetConn().Close() }},
		// close_notify, then the FIN: the alert waits unread in the
		// socket, so a peek sees bytes, not the end.
		{"the TLS client closes", true, false, func(c net.Conn) { c.Close() }},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := statstest.StartWith(t, nil, func(c *api.Config) {
				if tt.tls {
					c.TLS = tlsCfg
				}
				if tt.paced {
					c.Limits.MinTransferRate = 1024
					c.Limits.ReadTimeout = 10 * time.Second
				}
			})
			c := newClient(t, srv.URL, "")
			key := testKey(80 + i)
			addr := strings.TrimPrefix(strings.TrimPrefix(srv.URL, "http://"), "https://")
			var conn net.Conn
			if tt.tls {
				conn, err = tls.Dial("tcp", addr, pki.ClientConfig(t, false))
			} else {
				conn, err = net.Dial("tcp", addr)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if !tt.tls {
				if _, ok, err := c.AcquireLease(context.Background(), "default", key, "holder", time.Minute); err != nil || !ok {
					t.Fatalf("acquire: granted %v, %v", ok, err)
				}
			} else if _, err := conn.Write([]byte("POST /v1/default/leases/" + key + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 31\r\n\r\n{\"holder\":\"holder\",\"ttl_s\":60}\n")); err != nil {
				t.Fatal(err)
			}
			if tt.tls { // the lease's 201, then the long poll on the same connection
				buf := make([]byte, 4096)
				if n, err := conn.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 201") {
					t.Fatalf("lease over TLS: %q %v", buf[:n], err)
				}
			}
			if _, err := conn.Write([]byte("GET /v1/default/entries/" + key + "?wait=300s HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			waiters := func() int { _, w := srv.API.LeaseCounts(); return w }
			for waiters() != 1 {
				time.Sleep(5 * time.Millisecond)
			}
			tt.leave(conn)
			// The bound: far below the wait's 300 s, far above the ~1 s
			// the server takes to look.
			for deadline := time.Now().Add(20 * time.Second); waiters() != 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the departed client's waiter is still parked after 20 s of its 300 s wait")
				}
			}
			if held, _ := srv.API.LeaseCounts(); held != 1 {
				t.Errorf("leases held after the waiter left: %d, want the holder's 1", held)
			}
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ClientConfig(t, false)}}
			base := srv.URL
			if tt.tls {
				base = strings.Replace(base, "http://", "https://", 1)
			}
			resp, err := hc.Get(base + "/v1/stats")
			if err != nil {
				t.Fatal(err)
			}
			var st wire.StatsResponse
			if err := json.Unmarshal(apitest.ReadAll(t, resp), &st); err != nil {
				t.Fatal(err)
			}
			if s := st.Totals; s.Lookups != 0 {
				t.Errorf("the departed wait counted %d lookups (%d hits, %d misses), want none", s.Lookups, s.Hits, s.Misses)
			}
		})
	}
}

// TestWaitWokenAfterTheClientLeftCountsNothing: the entry arrives after the
// waiting client gave up (its socket closed: a client timeout, or a replica
// SIGSTOPped while clients waited and then resumed). The wait ends as
// client_gone and counts no hit: before, the server counted a wait hit for
// bytes nobody received (2 extra wait hits in a 6-arm sweep across a replica
// stopped for a minute), so its figures exceeded the clients'. The entry
// comes by a PUT here, which wakes the waiter, or straight into the store,
// as from another replica of a fleet, which the wait finds by looking.
func TestWaitWokenAfterTheClientLeftCountsNothing(t *testing.T) {
	for i, tc := range []struct {
		name  string
		wait  string
		write func(srv *statstest.Server, c *client.Client, key string) error
	}{
		{"put wakes it", "300s", func(_ *statstest.Server, c *client.Client, key string) error {
			_, err := c.Put(context.Background(), "default", key, strings.NewReader("exe"), client.PutOptions{Size: 3})
			return err
		}},
		{"found when the wait runs out", "1s", func(srv *statstest.Server, _ *client.Client, key string) error {
			k, err := cachekey.ParseKey(key)
			if err != nil {
				return err
			}
			_, err = srv.Store.Put(context.Background(), "default", k, strings.NewReader("exe"), store.PutOptions{Size: 3})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := statstest.StartWith(t, nil, nil)
			c := newClient(t, srv.URL, "")
			key := testKey(90 + i)
			if _, ok, err := c.AcquireLease(context.Background(), "default", key, "holder", time.Minute); err != nil || !ok {
				t.Fatalf("acquire: granted %v, %v", ok, err)
			}
			conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Write([]byte("GET /v1/default/entries/" + key + "?wait=" + tc.wait + "&waited=0 HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			waiters := func() int { _, w := srv.API.LeaseCounts(); return w }
			for waiters() != 1 {
				time.Sleep(5 * time.Millisecond)
			}
			conn.Close() // the client gives up, and then the entry comes
			if err := tc.write(srv, c, key); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(20 * time.Second); waiters() != 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the departed client's waiter is still parked after 20 s")
				}
			}
			srv.Restart() // waits for the handler to finish counting, and the stats to be saved
			resp, err := http.Get(srv.URL + "/v1/stats")
			if err != nil {
				t.Fatal(err)
			}
			var st wire.StatsResponse
			if err := json.Unmarshal(apitest.ReadAll(t, resp), &st); err != nil {
				t.Fatal(err)
			}
			if s := st.Totals; s.Lookups != 0 || s.WaitHits != 0 {
				t.Errorf("the departed wait counted %d lookups (%d hits, %d wait hits), want none", s.Lookups, s.Hits, s.WaitHits)
			}
		})
	}
}
