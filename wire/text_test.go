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
	}
	for _, tc := range tests {
		if got := OneLine(tc.in, tc.n); got != tc.want {
			t.Errorf("OneLine(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
