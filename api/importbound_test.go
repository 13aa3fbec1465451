package api_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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

// TestImportCutShortCountsWhatWasImported imports an export stream broken
// after n whole members, by a member cut short or by bytes that are no tar
// header: the 400 says how many entries were imported before it, in words
// that agree with the count ("1 entry was", "2 entries were").
func TestImportCutShortCountsWhatWasImported(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	for i := range 3 {
		if resp, b := put(t, srv, "default", testKey(i), uint64(i), 1000); resp.StatusCode != http.StatusCreated {
			t.Fatalf("PUT = %d (%s)", resp.StatusCode, b)
		}
	}
	resp := srv.Do(http.MethodGet, srv.URL+"/v1/default/export", nil)
	export := apitest.ReadAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("export = %d (%s)", resp.StatusCode, export)
	}
	type member struct {
		h    *tar.Header
		data []byte
	}
	var members []member
	tr := tar.NewReader(bytes.NewReader(export))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, member{h, data})
	}
	// broken is the export's first n members whole, then the next one cut
	// in the middle of its bytes (cut) or a block that is no tar header.
	broken := func(n int, cut bool) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, m := range members[:n] {
			if err := tw.WriteHeader(m.h); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(m.data); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Flush(); err != nil { // pads the last member, writes no end
			t.Fatal(err)
		}
		if !cut {
			return append(b.Bytes(), bytes.Repeat([]byte("x"), 512)...)
		}
		m := members[n]
		if err := tw.WriteHeader(m.h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(m.data[:len(m.data)/2]); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	tests := []struct {
		name  string
		whole int
		cut   bool
		want  string
	}{
		{"cut short after none", 0, true, " is cut short: the tar stream ends inside it; nothing of it was stored, and 0 entries were imported before it."},
		{"cut short after one", 1, true, " is cut short: the tar stream ends inside it; nothing of it was stored, and 1 entry was imported before it."},
		{"cut short after two", 2, true, " is cut short: the tar stream ends inside it; nothing of it was stored, and 2 entries were imported before it."},
		{"no header after one", 1, false, "(at member 2: archive/tar: invalid tar header); 1 entry was imported before it."},
		{"no header after two", 2, false, "(at member 3: archive/tar: invalid tar header); 2 entries were imported before it."},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := fmt.Sprintf("copy-%d", i) // each import into an empty namespace
			resp := srv.Do(http.MethodPost, srv.URL+"/v1/"+ns+"/import", bytes.NewReader(broken(tc.whole, tc.cut)), "Content-Type", "application/x-tar")
			body := apitest.ReadAll(t, resp)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
				t.Errorf("%d %s; want 400 saying %q", resp.StatusCode, body, tc.want)
			}
		})
	}
}
