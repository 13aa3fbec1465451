package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/store"
)

// TestAdminShowEscapesReports: anyone who may read a namespace may report
// its entries, and `admin show` printed each report's client id as sent
// and its reason with only the line breaks joined; and an entry's
// components as its writer's signature had them (an xla "platform" of
// "cpu\x1b[2J" is stored as is). Escape sequences in them reached the
// operator's terminal (colours, a window title, a cleared screen). Now
// every control character prints as U+FFFD, on one line.
func TestAdminShowEscapesReports(t *testing.T) {
	f := newFixture(t, nil)
	comp := putStore(t, f.srv, "team", []byte("components"), store.PutOptions{Writer: "alice", Backend: "xla",
		Components: map[string]string{"platform": "cpu\x1b[2J\n"}})
	if code, out, errOut := admin(t, f.srv.URL, adminSecret, "show", comp.key, "--namespace", "team"); code != 0 ||
		strings.ContainsAny(out, "\x1b\r") || !strings.Contains(out, "platform=cpu\uFFFD[2J\n") {
		t.Errorf("show an entry whose components hold an escape: exit %d %s\n%q", code, errOut, out)
	}
	body, err := json.Marshal(map[string]string{
		"reason": "deserialize raised\x1b]0;pwned\x07\x1b[2J\nsecond line",
		"client": "host-7\x1b[31m\r\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	resp := f.srv.Do(http.MethodPost, f.srv.URL+"/v1/team/entries/"+f.a2.key+"/reports", strings.NewReader(string(body)),
		"Authorization", "Bearer "+viewerSecret, "Content-Type", "application/json")
	if b := apitest.ReadAll(t, resp); resp.StatusCode != http.StatusOK {
		t.Fatalf("report: %d %s", resp.StatusCode, b)
	}
	code, out, errOut := admin(t, f.srv.URL, adminSecret, "show", f.a2.key, "--namespace", "team")
	if code != 0 {
		t.Fatalf("show: exit %d %s", code, errOut)
	}
	if strings.ContainsAny(out, "\x1b\x07\r") {
		t.Errorf("show prints control characters from a report: %q", out)
	}
	if !strings.Contains(out, "viewer/host-7\uFFFD[31m: deserialize raised\uFFFD]0;pwned\uFFFD\uFFFD[2J second line\n") {
		t.Errorf("show does not print the report on one line:\n%s", out)
	}
}
