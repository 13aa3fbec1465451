package api_test

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/keying/keyingtest"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/wire"
)

// serverMadeID matches an id the server makes (and any it takes).
var serverMadeID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// errorRequestID returns the error body's request_id ("" for none).
func errorRequestID(t *testing.T, body []byte) string {
	t.Helper()
	var e wire.ErrorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Error.RequestID
}

// TestRequestID: every answer (a success, a handler's error, a refusal
// before routing, one fasthttp itself reports) carries X-Request-Id: the
// client's when it is a sane one, else a new one the server made (never
// the raw value); an error body names it as request_id, and the request's
// log line as request_id, so a user's report leads to the log line.
func TestRequestID(t *testing.T) {
	var logs syncBuffer
	srv := apitest.Start(t, apitest.Options{
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		API: func(c *api.Config) {
			c.Limits.MaxHeaderBytes = 4096
			c.Keyer = keyingtest.Keyer(t, plugins.Config{}, keying.Config{})
		},
	})
	addr := strings.TrimPrefix(srv.URL, "http://")
	missing := "/v1/default/entries/" + entryKey("request id: absent")
	long := strings.Repeat("a", wire.MaxRequestIDLen+1)
	// The errors that handlers answer with more than the error object
	// (a lookup's miss, a lease's 409) name the id too: an entry to hold
	// a lease on and a lease that "holder-a" holds.
	present, leased := entryKey("request id: present"), entryKey("request id: leased")
	for _, req := range []string{
		"PUT /v1/default/entries/" + present + " HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nexe",
		withBody("POST /v1/default/leases/"+leased, `{"holder":"holder-a"}`, ""),
	} {
		if resp, body := exchange(t, addr, req); resp.StatusCode != http.StatusCreated {
			t.Fatalf("%.40q: %d %s", req, resp.StatusCode, body)
		}
	}
	for _, tc := range []struct {
		name    string
		request string
		sent    string // the X-Request-Id sent; "" for none
		status  int
		taken   bool // the server answers with the id sent
		errBody bool // the answer is a JSON error naming the id
	}{
		{"success, id sent", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: job-7:step.3_a\r\n\r\n", "job-7:step.3_a", 200, true, false},
		{"success, none sent", "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "", 200, false, false},
		{"metrics", "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Request-Id: scrape-1\r\n\r\n", "scrape-1", 200, true, false},
		{"miss", "GET " + missing + " HTTP/1.1\r\nHost: x\r\nX-Request-Id: 0f8e7c1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b\r\n\r\n", "0f8e7c1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b", 404, true, true},
		{"HEAD miss", "HEAD " + missing + " HTTP/1.1\r\nHost: x\r\nX-Request-Id: head-1\r\n\r\n", "head-1", 404, true, false},
		{"unsafe characters replaced", "GET " + missing + " HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\"b<script>\r\n\r\n", `a"b<script>`, 404, false, true},
		{"too long replaced", "GET " + missing + " HTTP/1.1\r\nHost: x\r\nX-Request-Id: " + long + "\r\n\r\n", long, 404, false, true},
		{"unknown route", "GET /v2/nothing HTTP/1.1\r\nHost: x\r\nX-Request-Id: route-1\r\n\r\n", "route-1", 404, true, true},
		{"unknown method, before routing", "PROPFIND /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: method-1\r\n\r\n", "method-1", 400, true, true},
		{"transfer coding, before routing", "PUT " + missing + " HTTP/1.1\r\nHost: x\r\nX-Request-Id: te-1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", "te-1", 501, true, true},
		{"lookup miss", withBody("POST /v1/default/lookup", `{"backend":"passthrough","kind":"jax","key":"jit_absent"}`, "lookup-1"), "lookup-1", 404, true, true},
		{"lease held", withBody("POST /v1/default/leases/"+leased, `{"holder":"holder-b"}`, "lease-1"), "lease-1", 409, true, true},
		{"lease on a stored entry", withBody("POST /v1/default/leases/"+present, `{"holder":"holder-b"}`, "lease-2"), "lease-2", 409, true, true},
		{"lease released by another holder", "DELETE /v1/default/leases/" + leased + "?holder=holder-b HTTP/1.1\r\nHost: x\r\nX-Request-Id: lease-3\r\n\r\n", "lease-3", 409, true, true},
		{"headers too large, fasthttp's own error", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 5000) + "\r\n\r\n", "", 431, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := exchange(t, addr, tc.request)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			id := resp.Header.Get(wire.HeaderRequestID)
			switch {
			case tc.taken && id != tc.sent:
				t.Fatalf("X-Request-Id %q, want the one sent, %q", id, tc.sent)
			case !tc.taken && (id == "" || id == tc.sent || !serverMadeID.MatchString(id)):
				t.Fatalf("X-Request-Id %q, want a new server-made id (sent %q)", id, tc.sent)
			}
			if tc.errBody {
				if got := errorRequestID(t, body); got != id {
					t.Errorf("error body's request_id %q, want the header's %q: %s", got, id, body)
				}
			}
			if tc.sent != "" && !tc.taken && strings.Contains(logs.String(), tc.sent) {
				t.Errorf("the refused id %q was logged", tc.sent)
			}
			if tc.status == 431 {
				return // fasthttp's own error, before any request: not logged as one
			}
			var lines []map[string]any
			for _, l := range logLines(t, logs.String(), "request") {
				if l["request_id"] == id {
					lines = append(lines, l)
				}
			}
			if len(lines) != 1 {
				t.Errorf("%d request log lines with request_id %q, want 1; log:\n%s", len(lines), id, logs.String())
			}
		})
	}
}

// TestRequestIDPerRequest: the requests of one keep-alive connection each
// get their own id (the server keeps it with the response, which fasthttp
// resets between requests).
func TestRequestIDPerRequest(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	seen := map[string]bool{}
	for i, sent := range []string{"first-1", "", "", "second-2"} {
		req := "GET /healthz HTTP/1.1\r\nHost: x\r\n"
		if sent != "" {
			req += "X-Request-Id: " + sent + "\r\n"
		}
		if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		id := resp.Header.Get(wire.HeaderRequestID)
		if id == "" || seen[id] || sent != "" && id != sent {
			t.Fatalf("request %d on one connection (sent %q): X-Request-Id %q; ids so far %v", i, sent, id, seen)
		}
		seen[id] = true
	}
}

// withBody returns the HTTP/1.1 request "METHOD PATH" with the JSON body
// and, unless id is "", the X-Request-Id id.
func withBody(methodPath, body, id string) string {
	req := methodPath + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
	if id != "" {
		req += "X-Request-Id: " + id + "\r\n"
	}
	return req + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// exchange sends req, as written, on a new connection to addr and returns
// the response (read as a HEAD's when req is one) with its body read.
func exchange(t *testing.T, addr, req string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	method, _, _ := strings.Cut(req, " ")
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// TestRequestIDOnConnectionRefusal: a connection past --max-conns is
// answered before its request is read, so with a new id, in the header and
// the body alike.
func TestRequestIDOnConnectionRefusal(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{API: func(c *api.Config) { c.Limits.MaxConns = 1 }})
	addr := strings.TrimPrefix(srv.URL, "http://")
	const get = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: held\r\n\r\n"
	if resp, _, _, _ := rawExchange(t, addr, get); resp.StatusCode != 200 {
		t.Fatalf("first connection: %d", resp.StatusCode)
	}
	ids := map[string]bool{}
	for range 2 {
		resp, body, _, _ := rawExchange(t, addr, get)
		id := resp.Header.Get(wire.HeaderRequestID)
		if resp.StatusCode != 503 || errCode(t, body) != "too_many_connections" || !serverMadeID.MatchString(id) || errorRequestID(t, body) != id {
			t.Fatalf("refusal: %d X-Request-Id %q %s", resp.StatusCode, id, body)
		}
		ids[id] = true
	}
	if len(ids) != 2 {
		t.Errorf("two refusals answered with the same id: %v", ids)
	}
}
