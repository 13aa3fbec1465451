package wire

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxCompileSeconds is the largest compile time an entry may declare
// (X-Compile-Seconds): seven days. The longest real compiles take hours;
// the ceiling keeps one writer from wrecking every total of compile time
// saved.
const MaxCompileSeconds = 7 * 24 * 60 * 60

// MaxLabelBytes bounds a backend or display name, in bytes.
const MaxLabelBytes = 256

var backendRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// CheckBackend reports whether b is a backend name as plugins declare them:
// 1 to 63 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or
// digit.
func CheckBackend(b string) error {
	if !backendRE.MatchString(b) {
		return fmt.Errorf("backend %s is invalid: use 1 to 63 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit (xla, passthrough, pt2)", Echo(b))
	}
	return nil
}

// CheckName reports whether n is a display name: valid UTF-8 of at most
// MaxLabelBytes bytes, printable characters and spaces only.
func CheckName(n string) error {
	switch {
	case len(n) > MaxLabelBytes:
		return fmt.Errorf("name is %d bytes; the limit is %d", len(n), MaxLabelBytes)
	case !utf8.ValidString(n):
		return errors.New("name is not valid UTF-8")
	}
	for i, r := range n {
		if !unicode.IsPrint(r) && r != ' ' {
			return fmt.Errorf("name has the non-printable character %U at byte %d", r, i)
		}
	}
	return nil
}

// ParseCompileSeconds parses a compile time in seconds: a finite number
// from 0 to MaxCompileSeconds.
func ParseCompileSeconds(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > MaxCompileSeconds {
		return 0, fmt.Errorf("compile seconds must be a number from 0 to %d (7 days), got %s", MaxCompileSeconds, Echo(v))
	}
	return f, nil
}

// ParseSHA256 parses a SHA-256 digest written as 64 hex characters, as
// X-Content-SHA256 and the PAX record CACHESVC.sha256 carry it. Any other
// length is an error, never a panic: hex.Decode into a 32-byte array
// indexes past it when given more.
func ParseSHA256(s string) ([32]byte, error) {
	var d [32]byte
	if len(s) != hex.EncodedLen(len(d)) {
		return d, fmt.Errorf("a SHA-256 is 64 hex characters, got %d characters", len(s))
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("a SHA-256 is 64 hex characters: %w", err)
	}
	return d, nil
}

// SanitizeBackend returns b when it is a valid backend name and "" (unknown)
// otherwise: for values read from storage written before validation. It
// allocates nothing, so recording paths may call it.
func SanitizeBackend(b string) string {
	if !backendRE.MatchString(b) {
		return ""
	}
	return b
}

// SanitizeName returns n with invalid UTF-8 and non-printable characters
// replaced by U+FFFD and cut to MaxLabelBytes: for values read from
// storage written before validation.
func SanitizeName(n string) string {
	if CheckName(n) == nil {
		return n
	}
	n = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || (!unicode.IsPrint(r) && r != ' ') {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(n, string(utf8.RuneError)))
	for len(n) > MaxLabelBytes {
		_, size := utf8.DecodeLastRuneInString(n)
		n = n[:len(n)-size]
	}
	return n
}

// ClampCompileSeconds returns f bounded to [0, MaxCompileSeconds], with NaN
// as 0: for values read from storage written before validation.
func ClampCompileSeconds(f float64) float64 {
	switch {
	case math.IsNaN(f) || f < 0:
		return 0
	case f > MaxCompileSeconds:
		return MaxCompileSeconds
	}
	return f
}
