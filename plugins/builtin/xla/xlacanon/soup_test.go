package xlacanon

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// soupTokens are the pieces whose interplay the scanners' removals depend
// on: removable constructs, the contexts that decide them, and separators.
var soupTokens = map[string][]string{
	FormatStableHLO: {
		"loc()", "loc(#l)", `loc("a"(#l))`, "#l = loc(x)", "#l", "//c\n", "\n", " ", "\t",
		",", "{", "}", "<", ">", "(", ")", "[", "]", "=", ":", "@m", "@\"q\"", "%a", "%0", "%b1",
		"jax.result_info", "jax.arg_info", "mhlo.layout_mode", `"default"`, `""`, `"x"`,
		"module", "x", "loc", "attributes", "/", "#", "%", "<{", "}>", "\r\n", "0", "_", ".",
		`"a\\"`, `"\""`, "@", "^bb0", "!t", "func.func",
	},
	FormatHLO: {
		"HloModule", "m", "_", "metadata=", "metadata={op_name=\"}\"}", "{", "}", ",", " ", "\n",
		"stack_frame_id=", "1", "//c\n", "/*c*/", "/", "*", "FileNames", "FunctionNames",
		"StackFrames", "FileLocations", `"a"`, "(", ")", "=", "x", "ENTRY", "%p", "\r\n", "\t",
		"HloModule ", "metadata={", `"\""`, "0", "[", "]",
	},
}

// TestTokenSoupFixedPoint canonicalizes random sequences of soupTokens
// (fixed seed) and checks that the canonical text is a fixed point: the
// byte-level fuzzers rarely assemble several removable constructs at once.
func TestTokenSoupFixedPoint(t *testing.T) {
	n, seed := 20000, uint64(1)
	if testing.Short() {
		n = 2000
	}
	// XLACANON_SOUP_SEED and XLACANON_SOUP_N explore further by hand.
	if v, err := strconv.ParseUint(os.Getenv("XLACANON_SOUP_SEED"), 10, 64); err == nil {
		seed = v
	}
	if v, err := strconv.Atoi(os.Getenv("XLACANON_SOUP_N")); err == nil {
		n = v
	}
	for _, format := range []string{FormatStableHLO, FormatHLO} {
		toks := soupTokens[format]
		r := rand.New(rand.NewPCG(seed, uint64(len(format))))
		var b strings.Builder
		for range n {
			b.Reset()
			for k := 1 + r.IntN(12); k > 0; k-- {
				b.WriteString(toks[r.IntN(len(toks))])
			}
			in := b.String()
			out, _, _, err := CanonicalModule([]byte(in), format)
			if err != nil {
				continue
			}
			again, _, _, err := CanonicalModule(out, format)
			if err != nil {
				t.Fatalf("%s: canonical text does not canonicalize: %v\n in %q\nout %q", format, err, in, out)
			}
			if string(again) != string(out) {
				t.Fatalf("%s: not idempotent\n in %q\nout %q\nagain %q", format, in, out, again)
			}
		}
	}
}
