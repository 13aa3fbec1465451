package wire

import (
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckLabels(t *testing.T) {
	for _, tc := range []struct {
		check func(string) error
		ok    []string
		bad   []string
	}{
		{CheckBackend,
			[]string{"xla", "passthrough", "pt2", "a.b_c-d", strings.Repeat("a", 63)},
			[]string{"", "XLA", "-x", "\xff", "a b", strings.Repeat("a", 64)}},
		{CheckName,
			[]string{"jit_step", "", "pjit(train step) ü", strings.Repeat("a", 256)},
			[]string{"\xff", "a\x00b", "tab\there", "\u200bzero-width", strings.Repeat("a", 257)}},
	} {
		for _, in := range tc.ok {
			if err := tc.check(in); err != nil {
				t.Errorf("%q refused: %v", in, err)
			}
		}
		for _, in := range tc.bad {
			if err := tc.check(in); err == nil {
				t.Errorf("%q accepted", in)
			}
		}
	}
}

func TestParseCompileSeconds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0", 0, true}, {"42.5", 42.5, true}, {"604800", 604800, true},
		{"604800.5", 0, false}, {"1e308", 0, false}, {"-1", 0, false}, {"NaN", 0, false},
		{"Inf", 0, false}, {"", 0, false}, {"abc", 0, false},
	} {
		got, err := ParseCompileSeconds(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseCompileSeconds(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseSHA256(t *testing.T) {
	hex64 := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{hex64, true}, {strings.ToUpper(hex64), true},
		{"", false}, {hex64[:62], false}, {hex64 + "ab", false}, {hex64 + "abab", false}, {hex64[:63] + "g", false},
	} {
		got, err := ParseSHA256(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseSHA256(%d chars) err = %v, want ok=%v", len(tc.in), err, tc.ok)
		}
		if tc.ok && got[0] != 0xab {
			t.Errorf("ParseSHA256(%q) = %x", tc.in, got)
		}
	}
}

func TestSanitize(t *testing.T) {
	if got := SanitizeBackend("\xff"); got != "" {
		t.Errorf("SanitizeBackend(0xff) = %q", got)
	}
	if got := SanitizeBackend("xla"); got != "xla" {
		t.Errorf("SanitizeBackend(xla) = %q", got)
	}
	for _, in := range []string{"\xffname", "a\x00b", strings.Repeat("é", 200)} {
		got := SanitizeName(in)
		if err := CheckName(got); err != nil || !utf8.ValidString(got) {
			t.Errorf("SanitizeName(%q) = %q, not a valid name: %v", in, got, err)
		}
	}
	for in, want := range map[float64]float64{math.NaN(): 0, -3: 0, 1e308: MaxCompileSeconds, math.Inf(1): MaxCompileSeconds, 12: 12} {
		if got := ClampCompileSeconds(in); got != want {
			t.Errorf("ClampCompileSeconds(%v) = %v, want %v", in, got, want)
		}
	}
}
