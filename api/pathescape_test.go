package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestPathParametersPercentDecoded: a namespace, key or run id in the path
// may be percent-encoded (RFC 3986 lets a client escape any character of a
// segment, and URL encoders escape a run id's ':', '@' and '+'); the server
// decodes each once, then validates it, on every route and for the token
// check alike. A malformed escape is a 400 that says so.
func TestPathParametersPercentDecoded(t *testing.T) {
	srv := secureServer(t, nil, nil)
	key := entryKey("escaped")
	escKey := "%" + strings.ToUpper(string("0123456789abcdef"[key[0]>>4])) + string("0123456789abcdef"[key[0]&15]) + key[1:]
	put := srv.Do(http.MethodPut, srv.URL+"/v1/%64efault/entries/"+key, strings.NewReader("bytes"), append(bearer(tokWriter), "X-Cachesvc-Run", "sweep:1@h+x")...)
	if b := apitest.ReadAll(t, put); put.StatusCode != 201 {
		t.Fatalf("PUT /v1/%%64efault/entries/KEY with a default:write token: %d %s, want 201", put.StatusCode, b)
	}
	for _, tc := range []struct {
		name, path string
		status     int
		code, says string
	}{
		{"plain", "/v1/default/entries/" + key, 200, "", ""},
		{"escaped namespace", "/v1/%64%65fault/entries/" + key, 200, "", ""},
		{"escaped key", "/v1/default/entries/" + escKey, 200, "", ""},
		{"escaped run", "/v1/default/runs/sweep%3A1%40h%2Bx/manifest", 200, "", ""},
		{"run as sent", "/v1/default/runs/sweep:1@h+x/manifest", 200, "", ""},
		{"malformed escape in namespace", "/v1/%zz/entries/" + key, 400, "bad_namespace", "percent-escape"},
		{"malformed escape in key", "/v1/default/entries/%g" + key[2:], 400, "bad_key", "percent-escape"},
		{"escaped slash", "/v1/de%2Ffault/entries/" + key, 400, "bad_namespace", "is invalid"},
		{"escaped upper case", "/v1/%44efault/entries/" + key, 400, "bad_namespace", "is invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Sent as written: Go's URL parser refuses a malformed escape.
			resp, body, _, _ := rawExchange(t, strings.TrimPrefix(srv.URL, "http://"),
				"GET "+tc.path+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+tokAdmin.Secret+"\r\nConnection: close\r\n\r\n")
			if resp.StatusCode != tc.status {
				t.Fatalf("GET %s: %d %s, want %d", tc.path, resp.StatusCode, body, tc.status)
			}
			if tc.code != "" && (errCode(t, body) != tc.code || !strings.Contains(string(body), tc.says)) {
				t.Fatalf("GET %s: %s, want %s saying %q", tc.path, body, tc.code, tc.says)
			}
		})
	}
}
