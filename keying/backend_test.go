package keying

import (
	"strings"
	"testing"
)

var backendSeeds = []string{
	`{"backend":"xla"}`,
	` { "module" : "a\"b\\" , "backend" : "xla" } `,
	`{"x":{"backend":"inner"},"backend":"outer"}`,
	`{"x":["backend",{"a":"}"}],"backend":"b"}`,
	`{"backend":"a","backend":"b"}`,
	`{"n":-1.5e3,"t":true,"z":null,"backend":"p"}`,
	`{"back\u0065nd":"xla"}`,
	`{"backend":"x\u006ca"}`,
	`{"backend":"xla"} trailing`,
	`{"backend":"xla",}`,
	`{"backend":7}`,
	`{"module":"unterminated}`,
	`[]`,
	`{}`,
	``,
	`{"a":"\\\\","backend":"q"}`,
	`{"a":"\\\"","backend":"q"}`,
	// encoding/json matches field names regardless of case; the scan, and
	// every plugin, does not.
	`{"backend":"a","BACKEND":"b"}`,
	`{"backend":"a","Backend":"b","\u0078":1}`,
	`{"Backend":"xla"}`,
}

// FuzzScanBackend checks that the fast scan, when it answers, agrees with
// encoding/json on valid JSON.
func FuzzScanBackend(f *testing.F) {
	for _, s := range backendSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := scanBackend(b)
		slow, err := backendOfSlow(b)
		if ok && err == nil && fast != slow {
			t.Fatalf("%q: fast %q, encoding/json %q", b, fast, slow)
		}
		if ok && err != nil && !strings.Contains(err.Error(), "JSON") {
			// The scan may accept what encoding/json rejects (it does not
			// validate everything); compute re-validates on failure.
			t.Logf("%q: fast %q, encoding/json: %v", b, fast, err)
		}
	})
}

func TestScanBackend(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{backendSeeds[0], "xla", true},
		{backendSeeds[1], "xla", true},
		{backendSeeds[2], "outer", true},
		{backendSeeds[3], "b", true},
		{backendSeeds[4], "b", true},
		{backendSeeds[5], "p", true},
		{backendSeeds[6], "", false}, // escaped key: fall back
		{backendSeeds[7], "", false}, // escaped value: fall back
		{backendSeeds[8], "", false},
		{backendSeeds[10], "", false},
		{backendSeeds[11], "", false},
		{backendSeeds[15], "q", true},
		{backendSeeds[16], "q", true},
	}
	for _, tt := range tests {
		got, ok := scanBackend([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("scanBackend(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	// Through backendOf, escaped forms still work via encoding/json.
	if b, err := backendOf([]byte(backendSeeds[6])); err != nil || b != "xla" {
		t.Errorf("escaped key: %q %v", b, err)
	}
	if b, err := backendOf([]byte(backendSeeds[7])); err != nil || b != "xla" {
		t.Errorf("escaped value: %q %v", b, err)
	}
}

// TestBackendOfIsCaseSensitive: a signature's backend is its field named
// exactly "backend", whichever parser reads it. encoding/json, the fallback
// for signatures the fast scan does not understand (an escape anywhere),
// matched "BACKEND" too, so one escaped key elsewhere sent a signature to
// another plugin than the same signature without it.
func TestBackendOfIsCaseSensitive(t *testing.T) {
	for _, tt := range []struct {
		in, want string
	}{
		{`{"backend":"passthrough","BACKEND":"xla"}`, "passthrough"},
		{`{"backend":"passthrough","BACKEND":"xla","\u0078":1}`, "passthrough"},
		{`{"Backend":"xla","backend":"passthrough","\u0078":{"backend":"inner"}}`, "passthrough"},
		{`{"back\u0065nd":"xla","Backend":"passthrough"}`, "xla"},
		{`{"Backend":"xla"}`, ""},
		{`{"Backend":"xla","\u0078":1}`, ""},
	} {
		got, err := backendOf([]byte(tt.in))
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("backendOf(%s) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
