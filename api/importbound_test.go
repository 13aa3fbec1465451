package api_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/wire"
)

// TestImportFailuresAreBounded imports members whose names are as long as
// a PAX record allows and all refused: the answer lists each with its name
// and message cut short, so that a namespace admin cannot make the server
// hold (and send) MaxImportFailures times a megabyte of names, several
// times over once quoted and JSON-escaped (100 such members once took the
// server to 5 GB and a 1.1 GB answer).
func TestImportFailuresAreBounded(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	const members, nameBytes = 3, 64 << 10
	for i := range members {
		name := fmt.Sprintf("%d", i) + strings.Repeat("\x01", nameBytes)
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Format: tar.FormatPAX}); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	resp := srv.Do(http.MethodPost, srv.URL+"/v1/default/import", &buf, "Content-Type", "application/x-tar")
	body := apitest.ReadAll(t, resp)
	var res wire.ImportResult
	if err := json.Unmarshal(body, &res); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %.300s", resp.StatusCode, body)
	}
	if res.Failed != members || len(res.Failures) != members {
		t.Fatalf("failed %d, %d listed; want %d", res.Failed, len(res.Failures), members)
	}
	for _, f := range res.Failures {
		if len(f.Member) > 1024 || len(f.Message) > 1024 || f.Code != "bad_member" {
			t.Errorf("failure of %d-byte member name, %d-byte message, code %s; want both cut to at most 1 KiB", len(f.Member), len(f.Message), f.Code)
		}
	}
	if len(body) > 16<<10 {
		t.Errorf("the answer is %d bytes for %d failures", len(body), members)
	}
}
