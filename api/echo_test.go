package api_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/keying"
)

// TestBadValuesNotEchoed: a token pasted into the wrong query parameter or
// header is refused with a 400 that neither echoes it nor logs it (it says
// how long it was instead), while a short bad value is still quoted.
func TestBadValuesNotEchoed(t *testing.T) {
	var logs syncBuffer
	srv := apitest.Start(t, apitest.Options{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	const token = "cachesvc_Q7vKp2xN4mR8sT1wY6zB3cD5fG9hJ0kL2nP4qS6u"
	const secret = "hunter2 my own long secret 0123456789" // invalid everywhere: it has spaces
	entry := srv.EntryURL("default", keyOf("echo"))
	for _, tc := range []struct {
		name, url string
		headers   []string
		value     string
	}{
		{"wait", entry + "?wait=" + token, nil, token},
		{"misses limit", srv.URL + "/v1/default/misses?limit=" + token, nil, token},
		{"list limit", srv.URL + "/v1/default/entries?limit=" + token, nil, token},
		{"list after", srv.URL + "/v1/entries?after=" + token, nil, token},
		{"list min_size", srv.URL + "/v1/default/entries?min_size=" + token, nil, token},
		{"list older_than", srv.URL + "/v1/default/entries?older_than=" + token, nil, token},
		{"list backend", srv.URL + "/v1/default/entries?backend=" + token, nil, token},
		{"list run", srv.URL + "/v1/default/entries?run=" + strings.ReplaceAll(secret, " ", "%20"), nil, secret},
		{"stats scope", srv.URL + "/v1/stats?scope=" + token, nil, token},
		{"stats since", srv.URL + "/v1/default/stats?since=" + token, nil, token},
		{"stats step", srv.URL + "/v1/default/stats?step=" + token, nil, token},
		{"run header", entry, []string{"X-Cachesvc-Run", secret}, secret},
		{"backend header", entry, []string{"X-Cachesvc-Backend", token}, token},
		{"compile seconds header", entry, []string{"X-Compile-Seconds", token}, token},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := srv.Do(http.MethodGet, tc.url, nil, tc.headers...)
			body := apitest.ReadAll(t, resp)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d %s, want 400", resp.StatusCode, body)
			}
			msg := string(body)
			if strings.Contains(msg, tc.value[9:20]) {
				t.Fatalf("the error echoes the value: %s", msg)
			}
			if want := strconv.Itoa(len(tc.value)) + " bytes"; !strings.Contains(msg, want) {
				t.Fatalf("the error does not say the value's length (%q): %s", want, msg)
			}
		})
	}
	for _, v := range []string{token[9:20], secret[9:20]} {
		if strings.Contains(logs.String(), v) {
			t.Fatalf("the log echoes a refused value:\n%s", grepLines(logs.String(), v))
		}
	}
	// Nor is a token cut short in the paste (16 bytes, the most Echo shows
	// of other values): its start is part of the secret.
	resp := srv.Do(http.MethodGet, entry+"?wait="+token[:16], nil)
	if body := apitest.ReadAll(t, resp); resp.StatusCode != 400 || strings.Contains(string(body), token[9:16]) ||
		strings.Contains(logs.String(), token[9:16]) {
		t.Fatalf("?wait=%s...: %d %s; want 400 without the token's start in the answer or the log:\n%s", token[:9], resp.StatusCode, body, grepLines(logs.String(), token[9:16]))
	}
	// A short value is still shown, to say what was wrong with it.
	resp = srv.Do(http.MethodGet, entry+"?wait=5x", nil)
	if body := apitest.ReadAll(t, resp); resp.StatusCode != 400 || !strings.Contains(string(body), `5x`) {
		t.Fatalf("?wait=5x: %d %s; want 400 quoting 5x", resp.StatusCode, body)
	}
}

// TestRangeAndLengthEchoes: a refused Range or pair of Content-Lengths is
// shown in the error as sent when it has the shape of one (digits, '-',
// ',' after "bytes="), without quotes that JSON escapes; anything else is
// quoted in printable ASCII, and a long value is cut (wire.Echo). Before,
// every value was quoted whole with %q: a 2,000-digit Range came back in
// full, and every message carried \"...\" in its JSON.
func TestRangeAndLengthEchoes(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	addr := strings.TrimPrefix(srv.URL, "http://")
	key := keyOf("echo-range")
	if resp, body := put(t, srv, "default", key, 1, 100); resp.StatusCode != 201 {
		t.Fatalf("PUT: %d %s", resp.StatusCode, body)
	}
	get := "GET /v1/default/entries/" + key + " HTTP/1.1\r\nHost: x\r\n"
	upload := "PUT /v1/default/entries/" + keyOf("echo-length") + " HTTP/1.1\r\nHost: x\r\n"
	long := "bytes=" + strings.Repeat("7", 2000) + "-"
	for _, tc := range []struct {
		name, request string
		status        int
		message       string
	}{
		{"end before start", get + "Range: bytes=5-1\r\n\r\n", 416,
			"Range bytes=5-1 is malformed: the end must be an integer not below the start."},
		{"two ranges", get + "Range: bytes=0-1, 5-6\r\n\r\n", 416,
			"Only a single byte range is supported, got bytes=0-1, 5-6."},
		{"past the end", get + "Range: bytes=100-\r\n\r\n", 416,
			"Range bytes=100- starts at or after the end of the 100-byte entry."},
		{"letters", get + "Range: bytes=abc\r\n\r\n", 416,
			`Range "bytes=abc" is malformed: use bytes=START-END, bytes=START- or bytes=-SUFFIX.`},
		{"a control character", get + "Range: bytes=1\x01-2\r\n\r\n", 416,
			`Range "bytes=1\x01-2" is malformed: the start must be a non-negative integer.`},
		{"long", get + "Range: " + long + "\r\n\r\n", 416,
			`Range "byte"... (2007 bytes, not shown in full: a long value may be a secret) is malformed: the start must be a non-negative integer.`},
		{"two lengths", upload + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400,
			"The request has Content-Length headers with different values (5 and 6); send one."},
	} {
		t.Run(tc.name, func(t *testing.T) { checkRefusal(t, addr, tc.request, tc.status, tc.message) })
	}
}

// TestCodingAndFieldValidationEchoes: a refused Content-Encoding or
// Transfer-Encoding is shown as sent when it is a list of registered
// codings (no quotes that JSON escapes), and a refused ?field_validation=,
// like any refused value of unknown shape, is quoted by wire.Echo, so a
// long one (a token pasted in the wrong place) is cut to its start. Before,
// each was quoted with %.Nq: the first 32 to 60 bytes of a token came back.
func TestCodingAndFieldValidationEchoes(t *testing.T) {
	srv := digestServer(t, keying.Config{}, nil) // a Keyer, so that lookup reads its body
	addr := strings.TrimPrefix(srv.URL, "http://")
	const token = "cachesvc_Q7vKp2xN4mR8sT1wY6zB3cD5fG9hJ0kL2nP4qS6u"
	cut := fmt.Sprintf(`"cach"... (%d bytes, not shown in full: a long value may be a secret)`, len(token))
	entry := func(name string) string {
		return "PUT /v1/default/entries/" + keyOf("echo-coding-"+name) + " HTTP/1.1\r\nHost: x\r\n"
	}
	lease := "POST /v1/default/leases/" + keyOf("echo-fv") + "?field_validation="
	leaseBody := " HTTP/1.1\r\nHost: x\r\nContent-Length: 14\r\n\r\n{\"holder\":\"h\"}"
	sig := `{"backend":"passthrough","kind":"jax","key":"k"}`
	lookup := fmt.Sprintf("POST /v1/default/lookup HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n", len(sig))
	chunked := "\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
	for _, tc := range []struct {
		name, request string
		status        int
		message       string
	}{
		{"field_validation short", lease + "Strict" + leaseBody, 400,
			`?field_validation= must be strict or warn, got "Strict".`},
		{"field_validation token", lease + token + leaseBody, 400,
			`?field_validation= must be strict or warn, got ` + cut + `.`},
		{"entry br", entry("br") + "Content-Encoding: br\r\nContent-Length: 5\r\n\r\nhello", 415,
			"Content-Encoding br is not supported on entries, which are stored and served byte for byte: upload the executable without a Content-Encoding."},
		{"entry token", entry("token") + "Content-Encoding: " + token + "\r\nContent-Length: 5\r\n\r\nhello", 415,
			"Content-Encoding " + strings.ToLower(cut) + " is not supported on entries, which are stored and served byte for byte: upload the executable without a Content-Encoding."},
		{"entry unknown", entry("unknown") + "Content-Encoding: snappy\r\nContent-Length: 5\r\n\r\nhello", 415,
			`Content-Encoding "snappy" is not supported on entries, which are stored and served byte for byte: upload the executable without a Content-Encoding.`},
		{"signature deflate", lookup + "Content-Encoding: deflate\r\n\r\n" + sig, 415,
			"Content-Encoding deflate is not supported on signatures; send gzip or no encoding."},
		{"signature two codings", lookup + "Content-Encoding: gzip, br\r\n\r\n" + sig, 415,
			"Content-Encoding gzip, br is not supported on signatures; send gzip or no encoding."},
		{"transfer gzip", entry("te-gzip") + "Transfer-Encoding: gzip, chunked" + chunked, 501,
			"Transfer-Encoding gzip, chunked is not supported: send the body as is or chunked; nothing was stored."},
		{"transfer unknown long", entry("te-custom") + "Transfer-Encoding: x-custom, chunked" + chunked, 501,
			`Transfer-Encoding "x-cu"... (17 bytes, not shown in full: a long value may be a secret) is not supported: send the body as is or chunked; nothing was stored.`},
		{"transfer token", entry("te-token") + "Transfer-Encoding: " + token + ", chunked" + chunked, 501,
			`Transfer-Encoding "cach"... (` + strconv.Itoa(len(token+", chunked")) + ` bytes, not shown in full: a long value may be a secret) is not supported: send the body as is or chunked; nothing was stored.`},
		{"transfer chunked twice", entry("te-twice") + "Transfer-Encoding: chunked, chunked" + chunked, 400,
			"Transfer-Encoding chunked, chunked leaves the body's length unknown: send Content-Length, or Transfer-Encoding: chunked alone; nothing was stored."},
		{"method unknown", "get /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 400,
			`Method "get" is not one this server knows: use GET, HEAD, PUT, POST or DELETE (methods are case-sensitive).`},
		{"method token", token + " /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 400,
			`Method ` + cut + ` is not one this server knows: use GET, HEAD, PUT, POST or DELETE (methods are case-sensitive).`},
		{"method not allowed", "DELETE /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 405,
			`Method "DELETE" is not allowed on this path: use GET, HEAD.`},
		{"transfer empty", entry("te-empty") + "Transfer-Encoding: " + chunked, 400,
			`Transfer-Encoding "" leaves the body's length unknown: send Content-Length, or Transfer-Encoding: chunked alone; nothing was stored.`},
	} {
		t.Run(tc.name, func(t *testing.T) { checkRefusal(t, addr, tc.request, tc.status, tc.message) })
	}
}

// checkRefusal sends the raw request to addr and checks the answer's status
// and error message.
func checkRefusal(t *testing.T, addr, request string, status int, message string) {
	t.Helper()
	resp, body, _, _ := rawExchange(t, addr, request)
	var got struct {
		Error struct{ Message string } `json:"error"`
	}
	if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != status || got.Error.Message != message {
		t.Fatalf("got %d %q (%v), want %d %q", resp.StatusCode, got.Error.Message, err, status, message)
	}
}
