package wire

import "testing"

func TestOneLine(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"", 5, ""},
		{"short", 5, "short"},
		{"  two\n lines\t", 20, "two lines"},
		{"toolong", 5, "tool…"},
		{"ééééé", 5, "ééééé"}, // 10 bytes, 5 runes: not cut
		{"éééééé", 5, "éééé…"},
		// Control characters would reach a terminal: an escape sequence
		// sets colours, a window title or clears the screen.
		{"a\x1b[2Jb", 20, "a\uFFFD[2Jb"},
		{"t\x1b]0;title\x07", 20, "t\uFFFD]0;title\uFFFD"},
		{"c1\u009b31m", 20, "c1\uFFFD31m"},
	}
	for _, tc := range tests {
		if got := OneLine(tc.in, tc.n); got != tc.want {
			t.Errorf("OneLine(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestCutRunes(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"", 3, ""},
		{"abcd", 3, "abcd"}, // n+1 runes: not cut ("…" would take the place of one)
		{"abcde", 3, "abc…"},
		{"ééé", 2, "ééé"},
		{"éééé", 2, "éé…"},           // 8 bytes: a cut by bytes would split the second é
		{"€€€€€", 1, "€…"},           // three-byte runes
		{"a\xffb\xfec", 2, "a\xff…"}, // a byte that is not UTF-8 is one rune, kept as is
		{"  two\n lines", 20, "  two\n lines"},
	}
	for _, tc := range tests {
		if got := CutRunes(tc.in, tc.n); got != tc.want {
			t.Errorf("CutRunes(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
