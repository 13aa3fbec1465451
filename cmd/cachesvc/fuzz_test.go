package main

import "testing"

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
