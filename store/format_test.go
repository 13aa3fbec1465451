package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/store"
)

// readFormat returns the format marker in dir.
func readFormat(t *testing.T, dir string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, store.FormatFile))
	if err != nil {
		t.Fatalf("read the format marker: %v", err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("format marker %q: %v", b, err)
	}
	return rec
}

// TestOpenWritesFormat: Open marks a new directory, and one written before
// the marker existed (no file: its entries read as before), with
// FormatVersion and the binary's version; an older format's marker is
// raised. testdata/format/v2.json is what this format's marker looks like
// on disk, and Open accepts it.
func TestOpenWritesFormat(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "format", "v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		marker []byte // written before the second Open; nil removes it
	}{
		{"new directory", nil},
		{"written before the marker", nil},
		{"format 1", []byte(`{"format":1}`)},
		{"golden v2", golden},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			key := store.Key{7}
			body := []byte("an executable written before the upgrade")
			if tc.name != "new directory" {
				s, err := store.Open(store.Config{Dir: dir, Logger: quietLogger(), Version: "cachesvc old"})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Put(context.Background(), "default", key, bytes.NewReader(body), store.PutOptions{Size: -1}); err != nil {
					t.Fatal(err)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(dir, store.FormatFile)
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				if tc.marker != nil {
					if err := os.WriteFile(path, tc.marker, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			s, err := store.Open(store.Config{Dir: dir, Logger: quietLogger(), Version: "cachesvc new"})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer s.Close()
			rec := readFormat(t, dir)
			if rec["format"] != float64(store.FormatVersion) || rec["written_by"] != "cachesvc new" {
				t.Errorf("marker %v, want format %d written by %q", rec, store.FormatVersion, "cachesvc new")
			}
			if tc.name == "new directory" {
				return
			}
			_, rc, err := s.Get(context.Background(), "default", key, 0, -1)
			if err != nil {
				t.Fatalf("Get of the entry written before: %v", err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("entry written before reads %q, %v; want %q", got, err, body)
			}
		})
	}
}

// TestOpenRefusesNewerFormat: a directory whose marker says a newer format
// (or does not parse) is refused before Badger touches it, with the
// formats, the writer and what to do, and is left exactly as it was.
func TestOpenRefusesNewerFormat(t *testing.T) {
	newer := fmt.Sprintf(`{"format":%d,"written_by":"cachesvc v9.0.0 (abcdef123456) go1.30"}`, store.FormatVersion+1)
	tests := []struct {
		name   string
		marker string
		is     error
		want   []string
	}{
		{"newer format", newer, store.ErrNewerFormat, []string{
			fmt.Sprintf("store format %d (written by cachesvc v9.0.0 (abcdef123456) go1.30)", store.FormatVersion+1),
			fmt.Sprintf("this binary (cachesvc test) reads store format %d at most", store.FormatVersion),
			"run the newer binary on it again, or give this one an empty --data directory",
		}},
		{"newer format, no writer", fmt.Sprintf(`{"format":%d}`, store.FormatVersion+5), store.ErrNewerFormat, []string{
			fmt.Sprintf("store format %d (written by a newer cachesvc)", store.FormatVersion+5),
		}},
		{"not JSON", "garbage", nil, []string{store.FormatFile + " does not hold a store format", "restore it from a backup"}},
		{"format 0", `{"format":0}`, nil, []string{"does not hold a store format", "format 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, store.FormatFile)
			if err := os.WriteFile(path, []byte(tc.marker), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := store.Open(store.Config{Dir: dir, Logger: quietLogger(), Version: "cachesvc test"})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Open: %v; want %v", err, tc.is)
			}
			if tc.is == nil && errors.Is(err, store.ErrNewerFormat) {
				t.Errorf("Open: %v; a damaged marker is not a newer format", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Open: %v\nwant it to contain %q", err, w)
				}
			}
			files, _ := os.ReadDir(dir)
			if len(files) != 1 {
				t.Errorf("directory holds %d files after the refusal, want only the marker", len(files))
			}
			if b, _ := os.ReadFile(path); string(b) != tc.marker {
				t.Errorf("marker is %q after the refusal, want it untouched", b)
			}
		})
	}
}
