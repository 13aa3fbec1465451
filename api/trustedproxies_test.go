package api_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/api/proxyaddr"
)

// trusting returns an API adjustment that trusts the proxies in list.
func trusting(t *testing.T, list string) func(*api.Config) {
	t.Helper()
	tp, err := proxyaddr.Parse(list)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *api.Config) { c.TrustedProxies = tp }
}

// TestTrustedProxiesNameTheClient: behind a proxy every connection comes
// from the proxy's address. With TrustedProxies covering the peer (the
// test's 127.0.0.1), the client that X-Forwarded-For names is the writer
// an unauthenticated server records and the request log's client; never
// by default, and never an address a client put left of the proxy's.
func TestTrustedProxiesNameTheClient(t *testing.T) {
	for _, tc := range []struct {
		name, trusted, xff, want string
	}{
		{"off by default", "", "203.0.113.7", "127.0.0.1"},
		{"untrusted peer", "10.0.0.0/8", "203.0.113.7", "127.0.0.1"},
		{"trusted proxy", "127.0.0.1", "203.0.113.7", "203.0.113.7"},
		{"client's own header ignored", "127.0.0.0/8", "198.51.100.1, 203.0.113.7", "203.0.113.7"},
		{"two proxies", "127.0.0.1,10.0.0.0/8", "198.51.100.1, 203.0.113.7, 10.1.2.3", "203.0.113.7"},
		{"not an address", "127.0.0.1", "unknown", "127.0.0.1"},
		{"no header", "127.0.0.1", "", "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			srv := apitest.Start(t, apitest.Options{API: trusting(t, tc.trusted),
				Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			var hdr []string
			if tc.xff != "" {
				hdr = []string{"X-Forwarded-For", tc.xff}
			}
			resp := srv.Do("PUT", srv.EntryURL("default", entryKey(tc.name)), strings.NewReader("exe"), hdr...)
			body := apitest.ReadAll(t, resp)
			if resp.StatusCode != 201 {
				t.Fatalf("PUT = %d %s", resp.StatusCode, body)
			}
			if got := resp.Header.Get("X-Cachesvc-Writer"); got != tc.want {
				t.Errorf("writer = %q, want %q", got, tc.want)
			}
			lines := logLines(t, logs.String(), "request")
			if len(lines) == 0 || lines[len(lines)-1]["client"] != tc.want {
				t.Errorf("request log lines %v, want the PUT's with client %q", lines, tc.want)
			}
		})
	}
}

// TestRateLimitPerForwardedClient: anonymous requests are rate-limited by
// client address. Behind a trusted proxy two clients get a bucket each;
// without TrustedProxies they share the proxy's, so the second client is
// refused for the first one's requests. Two IPv6 clients in one /64 have
// a bucket each by default (hosts of one subnet share it) and share one
// with IPv6ClientPrefix 64 (one host may hold the /64).
func TestRateLimitPerForwardedClient(t *testing.T) {
	for _, tc := range []struct {
		trusted       string
		prefix        int // Limits.IPv6ClientPrefix
		first, second string
		wantSecond    int
	}{
		{"", 0, "203.0.113.7", "203.0.113.8", 429},
		{"127.0.0.1", 0, "203.0.113.7", "203.0.113.8", 404},
		{"127.0.0.1", 0, "2001:db8:1:2::7", "2001:db8:1:2::8", 404},
		{"127.0.0.1", 64, "2001:db8:1:2::7", "2001:db8:1:2::8", 429},
		{"127.0.0.1", 64, "2001:db8:1:2::7", "2001:db8:1:3::7", 404},
	} {
		t.Run(fmt.Sprintf("trusted=%s/prefix=%d/%s", tc.trusted, tc.prefix, tc.second), func(t *testing.T) {
			trust := trusting(t, tc.trusted)
			srv := apitest.Start(t, apitest.Options{API: func(c *api.Config) {
				trust(c)
				c.Limits.RequestsPerSecond, c.Limits.Burst, c.Limits.IPv6ClientPrefix = 0.001, 1, tc.prefix
			}})
			u := srv.EntryURL("default", entryKey("rate"))
			for i, want := range []int{404, 429} {
				resp := srv.Do("GET", u, nil, "X-Forwarded-For", tc.first)
				if body := apitest.ReadAll(t, resp); resp.StatusCode != want {
					t.Fatalf("first client's GET %d = %d %s, want %d", i, resp.StatusCode, body, want)
				}
			}
			resp := srv.Do("GET", u, nil, "X-Forwarded-For", tc.second)
			if body := apitest.ReadAll(t, resp); resp.StatusCode != tc.wantSecond {
				t.Errorf("second client's GET = %d %s, want %d", resp.StatusCode, body, tc.wantSecond)
			}
		})
	}
}

// TestAnonymousReportersBehindProxy: anonymous reporters are counted by
// client address, so behind a proxy that is not trusted every report
// comes from one reporter and the entry is never quarantined; a trusted
// proxy's forwarded clients count one each, IPv6 ones by address or, with
// IPv6ClientPrefix 64, by /64 (one host may send from every address of
// its /64).
func TestAnonymousReportersBehindProxy(t *testing.T) {
	for _, tc := range []struct {
		trusted  string
		prefix   int // Limits.IPv6ClientPrefix
		from     [2]string
		distinct int
		quar     bool
	}{
		{"", 0, [2]string{"203.0.113.7", "203.0.113.8"}, 1, false},
		{"127.0.0.1", 0, [2]string{"203.0.113.7", "203.0.113.8"}, 2, true},
		{"127.0.0.1", 0, [2]string{"2001:db8:1:2::7", "2001:db8:1:2::8"}, 2, true},
		{"127.0.0.1", 64, [2]string{"2001:db8:1:2::7", "2001:db8:1:2::8"}, 1, false},
		{"127.0.0.1", 64, [2]string{"2001:db8:1:2::7", "2001:db8:1:3::7"}, 2, true},
	} {
		t.Run(fmt.Sprintf("trusted=%s/prefix=%d/%s", tc.trusted, tc.prefix, tc.from[1]), func(t *testing.T) {
			trust := trusting(t, tc.trusted)
			srv := secureServer(t, nil, func(c *api.Config) {
				trust(c)
				c.Limits.IPv6ClientPrefix = tc.prefix
			})
			k := entryKey("anonymous-behind-proxy")
			resp := srv.Do("PUT", srv.EntryURL("public", k), strings.NewReader("v"), bearer(tokAdmin)...)
			if body := apitest.ReadAll(t, resp); resp.StatusCode != 201 {
				t.Fatalf("PUT = %d %s", resp.StatusCode, body)
			}
			var doc []byte
			for i, addr := range tc.from {
				resp := srv.Do("POST", srv.URL+"/v1/public/entries/"+k+"/reports", strings.NewReader(`{"reason":"x"}`),
					"Content-Type", "application/json", "X-Forwarded-For", addr)
				doc = apitest.ReadAll(t, resp)
				if resp.StatusCode != 200 {
					t.Fatalf("report %d = %d %s", i, resp.StatusCode, doc)
				}
			}
			reportIs(2, tc.distinct, tc.quar)(t, doc)
		})
	}
}
