package main

import (
	"archive/tar"
	"bytes"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/wire"
)

// TestClientCommandsAgainstAnotherService points the client commands at a
// listening server that is not cachesvc (the fleet's S3 endpoint answers
// every path with an XML error): each says the answer is not cachesvc's and
// to check the URL, quoting the start of the body, not all of it.
func TestClientCommandsAgainstAnotherService(t *testing.T) {
	tail := "TAIL-OF-A-LONG-PAGE"
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InvalidBucketName</Code>" +
			strings.Repeat("<HostId>x</HostId>", 50) + tail + "</Error>"))
	}))
	defer s3.Close()
	tests := []struct {
		name string
		args []string
	}{
		{"admin list", []string{"admin", "list", "--url", s3.URL, "--token", "t"}},
		{"admin show", []string{"admin", "show", strings.Repeat("ab", 32), "--url", s3.URL, "--token", "t"}},
		{"stats", []string{"stats", "--url", s3.URL}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCmd(t, tc.args...)
			want := `not a cachesvc answer (application/xml: "<?xml version="1.0" encoding="UTF-8"?> <Error><Code>InvalidBucketName</Code>`
			if code != 1 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "check that the URL is the cachesvc server's") {
				t.Errorf("exit %d, stderr %q; want exit 1 and %q with a hint to check the URL", code, errOut, want)
			}
			if strings.Contains(errOut, tail) || strings.Count(errOut, "\n") > 2 {
				t.Errorf("stderr quotes the whole foreign body: %q", errOut)
			}
		})
	}
}

// TestClientCommandsAgainstAnEmptyAnswer: another HTTP service at --url
// that answers every path with an error and no body (seen: a 404 with
// Content-Length 0). cachesvc answers every error of these commands in
// JSON, so each says the answer is not cachesvc's and to check the URL;
// before, they said only "HTTP 404", which reads like cachesvc's own.
func TestClientCommandsAgainstAnEmptyAnswer(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
	}))
	defer other.Close()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"admin list", []string{"admin", "list", "--url", other.URL, "--token", "t"}},
		{"admin show", []string{"admin", "show", strings.Repeat("ab", 32), "--url", other.URL, "--token", "t"}},
		{"stats", []string{"stats", "--url", other.URL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCmd(t, tc.args...)
			if code != 1 || !strings.Contains(errOut, "not a cachesvc answer") || !strings.Contains(errOut, "check that the URL is the cachesvc server's") {
				t.Errorf("exit %d, stderr %q; want exit 1, saying it is not a cachesvc answer, with a hint to check the URL", code, errOut)
			}
		})
	}
}

// TestClientCommandsBehindARefusingProxy: a reverse proxy with its default
// body limit (nginx: 1 MB) answers an import with its own HTML 413. The
// command quotes it and names the proxy setting to lift, rather than
// sending the user to check a URL that is right.
func TestClientCommandsBehindARefusingProxy(t *testing.T) {
	for _, tc := range []struct {
		status int
		args   func(url string) []string
		want   string
	}{
		{413, func(u string) []string {
			return []string{"admin", "import", importTar(t), "--namespace", "copy", "--url", u}
		}, "client_max_body_size 0"},
		{504, func(u string) []string { return []string{"stats", "--url", u} }, "proxy_read_timeout"},
		{502, func(u string) []string { return []string{"admin", "list", "--url", u} }, "could not reach it"},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodHead {
					w.WriteHeader(http.StatusNotFound) // import asks what is present first
					return
				}
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(tc.status)
				fmt.Fprintf(w, "<html>\r\n<head><title>%d %s</title></head>\r\n<body>\r\n<center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n", tc.status, http.StatusText(tc.status))
			}))
			defer proxy.Close()
			code, _, errOut := runCmd(t, tc.args(proxy.URL)...)
			if code != 1 || !strings.Contains(errOut, "not a cachesvc answer (text/html") || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "check that the URL") {
				t.Errorf("exit %d, stderr %q; want exit 1, the page quoted and %q", code, errOut, tc.want)
			}
		})
	}
}

// importTar writes a one-entry export file for admin import.
func importTar(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := []byte("an executable")
	writeMember(t, tw, strings.Repeat("ab", 32), body, map[string]string{wire.PAXSHA256: hex.EncodeToString(sha256Of(body))})
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "export.tar")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
