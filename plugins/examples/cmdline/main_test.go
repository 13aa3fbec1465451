package main

import (
	"testing"

	"github.com/cachesvc/cachesvc/plugins/sdk"
)

// The plugin's logic runs natively through sdk.Invoke; the host-level tests
// (build to wasm, load with --plugins, serve keys) are in cmd/cachesvc.
func TestCanonicalize(t *testing.T) {
	base := `{"backend":"cmdline","tool":"gcc","tool_version":"13.2.0","args":["-O2","-c","a.c","-o","/tmp/1/a.o"],"inputs":{"a.c":"sha256:aa"},"env":{"LANG":"C","PWD":"/home/x"}}`
	tests := []struct {
		name string
		sig  string
		same bool // same canonical bytes as base
		err  bool
	}{
		{"identical", base, true, false},
		{"other output path", `{"backend":"cmdline","tool":"gcc","tool_version":"13.2.0","args":["-O2","-c","a.c","-o","/tmp/2/a.o"],"inputs":{"a.c":"sha256:aa"},"env":{"LANG":"C","PWD":"/home/x"}}`, true, false},
		{"irrelevant env", `{"backend":"cmdline","tool":"gcc","tool_version":"13.2.0","args":["-O2","-c","a.c","-o","/tmp/1/a.o"],"inputs":{"a.c":"sha256:aa"},"env":{"LANG":"C","PWD":"/elsewhere"}}`, true, false},
		{"other flag", `{"backend":"cmdline","tool":"gcc","tool_version":"13.2.0","args":["-O3","-c","a.c","-o","/tmp/1/a.o"],"inputs":{"a.c":"sha256:aa"},"env":{"LANG":"C"}}`, false, false},
		{"other input", `{"backend":"cmdline","tool":"gcc","tool_version":"13.2.0","args":["-O2","-c","a.c","-o","/tmp/1/a.o"],"inputs":{"a.c":"sha256:bb"},"env":{"LANG":"C"}}`, false, false},
		{"other version", `{"backend":"cmdline","tool":"gcc","tool_version":"14.1.0","args":["-O2","-c","a.c","-o","/tmp/1/a.o"],"inputs":{"a.c":"sha256:aa"},"env":{"LANG":"C"}}`, false, false},
		{"unknown field", `{"backend":"cmdline","tool":"gcc","tool_version":"1","cwd":"/x"}`, false, true},
		{"no tool", `{"backend":"cmdline"}`, false, true},
	}
	want, err := sdk.Invoke([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sdk.Invoke([]byte(tt.sig))
			if (err != nil) != tt.err {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				return
			}
			if same := string(got.Canonical) == string(want.Canonical); same != tt.same {
				t.Fatalf("same = %v; canonical:\n%s", same, got.Canonical)
			}
		})
	}
}
