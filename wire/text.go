package wire

import "strings"

// OneLine returns s on one line (each run of white space, line breaks
// included, as one space) and at most n runes long: cut to its first n-1
// runes and "…" when longer. For quoting names, reasons and foreign bodies
// in tables and error messages.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n { // n bytes hold at most n runes
		return s
	}
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
