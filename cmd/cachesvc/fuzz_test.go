package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/store"
)

// FuzzParseSize checks the size flags' parser: any input parses to a
// non-negative size or fails with an error, never panics, and every size
// it formats parses back to itself.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "4096", "512MB", "10GiB", "1.5G", " 7 kib ", "8E", "9223372036854775807", "8388608T", ".", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("parseSize(%q) = %d, negative", s, n)
		}
		back, err := parseSize(formatSize(n))
		if err != nil || back != n {
			t.Fatalf("parseSize(formatSize(%d) = %q) = %d, %v", n, formatSize(n), back, err)
		}
	})
}

// FuzzParseNamespaces checks the namespaces file's parser: any input
// parses to quotas the store accepts or fails with an error naming the file
// and a line, never panics.
func FuzzParseNamespaces(f *testing.F) {
	for _, s := range []string{
		`{"namespaces": {"team-a": {"max_bytes": "50GB", "max_entries": 100000, "max_idle": "168h", "max_age": "30d"}}, "default": {"max_bytes": 1}}`,
		`{}`, `{"default": {}}`, `{"namespaces": {"a": {"max_bytes": "1.5e3"}}}`, "{\n\"default\": {\"max_idle\": \"1d\",,}}", `[`, `{"namespaces": {"a": {}, "a": {}}}`,
	} {
		f.Add(s)
	}
	st, err := store.Open(store.Config{Dir: f.TempDir(), GCInterval: -1, ExpiryInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	f.Fuzz(func(t *testing.T, s string) {
		q, err := parseNamespaces("f.json", []byte(s))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "namespaces file f.json:") {
				t.Fatalf("error %q does not name the file and line", err)
			}
			return
		}
		if err := st.SetQuotas(q); err != nil {
			t.Fatalf("the store refuses parsed quotas %+v: %v", q, err)
		}
	})
}
