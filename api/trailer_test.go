package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
)

// TestChunkedTrailerNeverEchoed sends chunked uploads whose trailer the
// server refuses. fasthttp's error for a bad trailer quoted up to 400 bytes
// of it, and that error went into the 400 body and two log lines: a token
// in a trailer field (Authorization is forbidden there) was shown to anyone
// reading the logs, and a trailer over the header limit answered 400
// incomplete_body saying "Increase ReadBufferSize", a knob no operator has.
// Now no byte of the trailer is echoed, and an oversized trailer gets 431
// naming --max-header-size. Nothing is stored either way.
func TestChunkedTrailerNeverEchoed(t *testing.T) {
	const secret = "s3cr3t-in-trailer-5e1d"
	var logs syncBuffer
	srv := secureServer(t, &logs, nil)
	addr := strings.TrimPrefix(srv.URL, "http://")
	body := "5\r\nhello\r\n0\r\n"
	for _, tc := range []struct {
		name, trailer string
		status        int
		code, says    string
	}{
		{"forbidden field", "Authorization: Bearer " + secret + "\r\n", 400, "incomplete_body", "forbidden trailer key"},
		{"over the header limit", "X-Note: " + secret + "\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("p", 100)+"\r\n", 200),
			431, "request_header_fields_too_large", "--max-header-size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := entryKey("trailer-" + tc.name)
			req := fmt.Sprintf("PUT /v1/default/entries/%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n\r\n%s%s\r\n",
				key, tokWriter.Secret, body, tc.trailer)
			resp, got, _, _ := rawExchange(t, addr, req)
			if resp.StatusCode != tc.status || errCode(t, got) != tc.code || !strings.Contains(string(got), tc.says) {
				t.Errorf("status %d, body %s; want %d %s saying %q", resp.StatusCode, got, tc.status, tc.code, tc.says)
			}
			if strings.Contains(string(got), secret) {
				t.Errorf("the answer quotes the trailer: %s", got)
			}
			if st := srv.Do(http.MethodGet, srv.EntryURL("default", key), nil, bearer(tokReader)...); st.StatusCode != http.StatusNotFound {
				t.Errorf("GET after a refused upload = %d, want 404", st.StatusCode)
			} else {
				apitest.ReadAll(t, st)
			}
		})
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the logs quote the trailer:\n%s", logs.String())
	}
}
