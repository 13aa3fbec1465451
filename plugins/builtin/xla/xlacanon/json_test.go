package xlacanon

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"testing"
	"unicode/utf8"
)

// TestStrMatchesEncodingJSON decodes random strings built from escapes,
// plain runs and multi-byte text at every alignment and buffer size and
// compares the result with encoding/json's, so that the word loop's exits
// (an escape at each byte of a word, the end of the input, a full buffer)
// are all taken. Most strings are longer than the wasm loop's 34-byte
// window. It runs under wasm too, where the loop is a different file.
func TestStrMatchesEncodingJSON(t *testing.T) {
	pieces := []string{
		"a", "abc", "abcdefg", "abcdefghijklmnop", "abcdefghijklmnopqrstuvwxyz0123456789", `\n`, `\"`, `\\`, `\/`, `\t`,
		`\b`, `\f`, `\r`, `\u0041`, `\u00e9`, `\u20ac`, `\ud83d\ude00`, "é", "€", "😀",
	}
	rng := rand.New(rand.NewSource(1))
	for n := 0; n < 2000; n++ {
		var enc bytes.Buffer
		enc.WriteByte('"')
		for k := rng.Intn(40); k > 0; k-- {
			enc.WriteString(pieces[rng.Intn(len(pieces))])
		}
		enc.WriteByte('"')
		lit := enc.Bytes()
		var want string
		if err := json.Unmarshal(lit, &want); err != nil {
			t.Fatalf("encoding/json rejects %s: %v", lit, err)
		}
		// The closing quote is the only way out: without it the string is
		// unterminated wherever the input ends.
		for c := 0; c < 4; c++ {
			cut := 1 + rng.Intn(len(lit)-1)
			r := jreader{b: lit[:cut]}
			if _, err := r.str(nil); err == nil {
				t.Fatalf("str(%s) accepted without its closing quote", r.b)
			}
		}
		for _, tail := range []string{"", "}", `,"k":"é"}`} {
			for _, capacity := range []int{0, 3, 17, 64} {
				pre := bytes.Repeat([]byte{' '}, n%9)
				r := jreader{b: append(append(pre, lit...), tail...), i: len(pre)}
				dst := append(make([]byte, 0, capacity), "x"...)
				got, err := r.str(dst)
				if err != nil {
					t.Fatalf("str(%s): %v", lit, err)
				}
				if string(got) != "x"+want {
					t.Fatalf("str(%s) = %q, want %q", lit, got, "x"+want)
				}
				if r.i != len(pre)+len(lit) {
					t.Fatalf("str(%s) stopped at %d, want %d", lit, r.i, len(pre)+len(lit))
				}
				if !r.high && !isASCII(got) {
					t.Fatalf("str(%s) = %q with a byte >= 0x80 but r.high unset", lit, got)
				}
			}
		}
	}
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// TestStrErrors checks the errors str reports for bad escapes wherever they
// fall in a word.
func TestStrErrors(t *testing.T) {
	for pad := 0; pad < 20; pad++ {
		p := string(bytes.Repeat([]byte{'a'}, pad))
		for _, tt := range []struct{ in, want string }{
			{`"` + p + `\x"`, `bad escape \x in JSON string`},
			{`"` + p + `\u12"`, `bad \u escape in JSON string`},
			{`"` + p + `\ud800"`, `unpaired surrogate in JSON string`},
			{`"` + p + `\`, `unterminated JSON string`},
			{`"` + p, `unterminated JSON string`},
		} {
			r := jreader{b: []byte(tt.in)}
			_, err := r.str(nil)
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tt.want)) {
				t.Errorf("str(%s) = %v, want an error mentioning %q", tt.in, err, tt.want)
			}
		}
	}
}
