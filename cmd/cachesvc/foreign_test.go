package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
