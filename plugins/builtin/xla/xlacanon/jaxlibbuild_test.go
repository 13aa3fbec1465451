package xlacanon

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// buildA and buildB are two jaxlib build fingerprints (SHA-256 in hex).
var (
	buildA = strings.Repeat("0123456789abcdef", 4)
	buildB = strings.Repeat("fedcba9876543210", 4)
)

func sigWithBuild(build string) string {
	return `{"backend":"xla","platform":"cpu","jaxlib_version":"0.10.2",` + build + `"module":"` + tinyMLIR + `"}`
}

// recordWithoutBuild is the canonical record of sigWithBuild("") as it was
// before the jaxlib_build field existed: absent, the field must leave it
// (and so every existing key) byte for byte unchanged.
const recordWithoutBuild = canonicalMagic +
	"module_format 9\nstablehlo\nplatform 3\ncpu\nplatform_version 0\n\njaxlib_version 6\n0.10.2\n" +
	"compile_options 0\n\ntopology 0\n\ncodec 0\n\nextra 0\n\nxla_flags 0\n" +
	"module 00000000000000000089\nmodule {func.func public @main(%0: tensor<i32>) -> tensor<i32> {return %0 : tensor<i32>}}\n"

func TestJaxlibBuild(t *testing.T) {
	tests := []struct {
		name, field string
		record      string // the whole canonical record, when pinned
		component   string // the jaxlib_build component, "" = none
	}{
		{"absent", ``, recordWithoutBuild, ""},
		{"null is absent", `"jaxlib_build":null,`, recordWithoutBuild, ""},
		{"empty is absent", `"jaxlib_build":"",`, recordWithoutBuild, ""},
		{"present", `"jaxlib_build":"` + buildA + `",`,
			strings.Replace(recordWithoutBuild, "0.10.2\n", "0.10.2\njaxlib_build 64\n"+buildA+"\n", 1), buildA},
		{"another build", `"jaxlib_build":"` + buildB + `",`, "", buildB},
	}
	keys := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Canonicalize([]byte(sigWithBuild(tt.field)))
			if err != nil {
				t.Fatal(err)
			}
			if tt.record != "" && string(r.Canonical) != tt.record {
				t.Errorf("canonical record\n got %q\nwant %q", r.Canonical, tt.record)
			}
			got, ok := r.Components["jaxlib_build"]
			if got != tt.component || ok != (tt.component != "") {
				t.Errorf("component jaxlib_build = %q (present %v), want %q", got, ok, tt.component)
			}
			sum := sha256.Sum256(r.Canonical)
			keys[tt.name] = hex.EncodeToString(sum[:])

			// normalize keeps the field and is a fixed point.
			var c Canonicalizer
			norm, err := c.Normalize([]byte(sigWithBuild(tt.field)))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(norm), "jaxlib_build") != (tt.component != "") {
				t.Errorf("normalized signature %s", norm)
			}
			norm = append([]byte(nil), norm...)
			again, err := Canonicalize(norm)
			if err != nil || string(again.Canonical) != string(r.Canonical) {
				t.Errorf("canonicalize(normalize(s)) differs (%v)", err)
			}
		})
	}
	if keys["absent"] != keys["null is absent"] || keys["absent"] != keys["empty is absent"] {
		t.Error("absent, null and empty jaxlib_build give different records")
	}
	if keys["absent"] == keys["present"] || keys["present"] == keys["another build"] || keys["absent"] == keys["another build"] {
		t.Error("jaxlib builds share a record: two builds would share an executable")
	}
}

func TestJaxlibBuildInvalid(t *testing.T) {
	tests := []struct{ name, value, want string }{
		{"too short", `"abc"`, `field "jaxlib_build" must be 64 lowercase hex digits (a SHA-256), got 3 characters`},
		{"too long", `"` + buildA + `0"`, `got 65 characters`},
		{"upper case", `"` + strings.ToUpper(buildA) + `"`, `field "jaxlib_build" must be 64 lowercase hex digits (a SHA-256): byte 10 is 'A'`},
		{"not hex", `"` + buildA[:63] + `g"`, `byte 63 is 'g'`},
		{"prefixed", `"sha256:` + buildA[7:] + `"`, `byte 0 is 's'`},
		{"not a string", `12`, `expected a JSON string`},
		{"duplicate", `"` + buildA + `","jaxlib_build":"` + buildA + `"`, `duplicate field "jaxlib_build"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Canonicalize([]byte(sigWithBuild(`"jaxlib_build":` + tt.value + `,`)))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrSignature) {
				t.Errorf("error %v does not wrap ErrSignature", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}
