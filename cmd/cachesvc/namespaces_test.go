package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
)

func TestParseNamespaces(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    store.Quotas
		wantErr string // substring, with the line: "f.json:3: ..."
	}{
		{
			name: "full file",
			file: `{
  "namespaces": {
    "team-a": {"max_bytes": "50GB", "max_entries": 100000, "max_idle": "168h", "max_age": "30d"},
    "ci": {"max_bytes": 1048576},
    "free": {}
  },
  "default": {"max_bytes": "5GiB", "max_idle": "1.5d"}
}`,
			want: store.Quotas{
				Namespaces: map[string]store.Quota{
					"team-a": {MaxBytes: 50e9, MaxEntries: 100000, MaxIdle: 168 * time.Hour, MaxAge: 30 * 24 * time.Hour},
					"ci":     {MaxBytes: 1 << 20},
					"free":   {},
				},
				Default: store.Quota{MaxBytes: 5 << 30, MaxIdle: 36 * time.Hour},
			},
		},
		{name: "empty object", file: `{}`, want: store.Quotas{Namespaces: map[string]store.Quota{}}},
		{name: "only a default", file: "{\"default\": {\"max_entries\": 10}}\n", want: store.Quotas{Namespaces: map[string]store.Quota{}, Default: store.Quota{MaxEntries: 10}}},
		{name: "unknown top-level field", file: "{\n  \"namespace\": {}\n}", wantErr: `f.json:2: unknown field "namespace" at the top level: use namespaces or default`},
		{name: "unknown quota field", file: "{\"namespaces\": {\n\"a\": {\n  \"max_size\": \"1GB\"}}}", wantErr: `f.json:3: namespace "a": unknown field "max_size": use max_bytes, max_entries, max_idle or max_age`},
		{name: "bad unit", file: "{\"namespaces\": {\"a\": {\n\"max_bytes\": \"50XB\"}}}", wantErr: `f.json:2: namespace "a": max_bytes: size "50XB" has unknown unit "XB"`},
		{name: "negative entries", file: `{"default": {"max_entries": -1}}`, wantErr: `f.json:1: "default": max_entries: -1 is not a non-negative integer`},
		{name: "fractional entries", file: `{"default": {"max_entries": 1.5}}`, wantErr: `max_entries: 1.5 is not a non-negative integer`},
		{name: "bare number duration", file: `{"default": {"max_idle": 3600}}`, wantErr: `max_idle: 3600 is not a duration: use a string such as "90m"`},
		{name: "bad duration", file: `{"default": {"max_age": "a week"}}`, wantErr: `max_age: "a week" is not a non-negative duration`},
		{name: "negative duration", file: `{"default": {"max_age": "-1h"}}`, wantErr: `max_age: "-1h" is not a non-negative duration`},
		{name: "bad days", file: `{"default": {"max_age": "xd"}}`, wantErr: `max_age: "xd" is not a number of days`},
		{name: "invalid namespace", file: "{\"namespaces\": {\n\n\"Team A\": {}}}", wantErr: `f.json:3: namespace "Team A" is invalid`},
		{name: "repeated namespace", file: "{\"namespaces\": {\"a\": {},\n\"a\": {}}}", wantErr: `f.json:2: "a" appears twice in "namespaces"`},
		{name: "repeated field", file: "{\"default\": {\"max_bytes\": 1,\n \"max_bytes\": 2}}", wantErr: `f.json:2: "max_bytes" appears twice in "default"`},
		{name: "namespaces not an object", file: `{"namespaces": ["a"]}`, wantErr: `f.json:1: "namespaces" must be a JSON object, not an array`},
		{name: "top level not an object", file: `[]`, wantErr: `f.json:1: the top level must be a JSON object, not an array`},
		{name: "syntax error", file: "{\n\"default\": {\n\"max_bytes\": 1,,\n}}", wantErr: `f.json:3: invalid character ','`},
		{name: "truncated", file: "{\"default\": {", wantErr: `f.json:1: the file ends inside a JSON value`},
		{name: "trailing data", file: "{}\n{}", wantErr: `f.json:2: unexpected data after the top-level object`},
		{name: "null block", file: `{"default": null}`, wantErr: `"default" must be a JSON object, not null`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseNamespaces("f.json", []byte(tc.file))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "namespaces file f.json:") {
					t.Fatalf("error %q does not start with the file and line", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Default != tc.want.Default || len(got.Namespaces) != len(tc.want.Namespaces) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for ns, q := range tc.want.Namespaces {
				if g, ok := got.Namespaces[ns]; !ok || g != q {
					t.Fatalf("namespace %s: %+v, want %+v", ns, g, q)
				}
			}
		})
	}
}

func TestLoadNamespacesErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := loadNamespaces(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "read namespaces file") {
		t.Fatalf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(strings.Repeat(" ", maxNamespacesFile+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadNamespaces(big); err == nil || !strings.Contains(err.Error(), "is over") {
		t.Fatalf("oversized file: %v", err)
	}
}

func TestDiffQuotas(t *testing.T) {
	a := store.Quotas{Namespaces: map[string]store.Quota{"kept": {MaxBytes: 1}, "changed": {MaxBytes: 1}, "gone": {}}}
	b := store.Quotas{Namespaces: map[string]store.Quota{"kept": {MaxBytes: 1}, "changed": {MaxBytes: 2}, "new": {}}}
	added, removed, changed := diffQuotas(a, b)
	if strings.Join(added, ",") != "new" || strings.Join(removed, ",") != "gone" || strings.Join(changed, ",") != "changed" {
		t.Fatalf("added %v removed %v changed %v", added, removed, changed)
	}
}
