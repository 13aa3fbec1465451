package main

import "testing"

// TestSuggest: what a misspelt name is taken to mean, and when nothing is
// suggested rather than a guess.
func TestSuggest(t *testing.T) {
	flags := []string{"addr", "data", "token", "token-file", "max-size", "max-entry-size", "url", "server", "namespace", "ns"}
	tests := []struct{ name, want string }{
		{"adr", "addr"},
		{"namsepace", "namespace"}, // a swap is one edit
		{"tokn", "token"},
		{"token-fle", "token-file"},
		{"max-entry", "max-entry-size"}, // the only name it begins
		{"max", ""},                     // begins two
		{"tok", ""},                     // begins two
		{"frobnicate", ""},
		{"dat", "data"},
		{"xyz", ""},
		{"max-sise", "max-size"},
		{"n", ""},
	}
	for _, tt := range tests {
		if got := suggest(tt.name, flags); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
