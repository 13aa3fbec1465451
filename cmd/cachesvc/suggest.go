package main

import (
	"flag"
	"strings"
)

// suggest returns the one candidate a misspelt name most likely meant, or
// "" when none is close or two are equally close: a name within one edit
// (two when both are over four characters; a swap of neighbours is one
// edit; never as many edits as the name has characters),
// else the only candidate the name begins, at three characters or more
// (--max-entry for --max-entry-size).
func suggest(name string, candidates []string) string {
	best, bestDist, tie := "", 0, false
	for _, c := range candidates {
		d := editDistance(name, c)
		limit := 1
		if min(len(name), len(c)) > 4 {
			limit = 2
		}
		if d == 0 || d > limit || d >= len(name) {
			continue
		}
		switch {
		case best == "" || d < bestDist:
			best, bestDist, tie = c, d, false
		case d == bestDist:
			tie = true
		}
	}
	if best != "" {
		if tie {
			return ""
		}
		return best
	}
	if len(name) < 3 {
		return ""
	}
	for _, c := range candidates {
		if strings.HasPrefix(c, name) && c != name {
			if best != "" {
				return "" // ambiguous: --tok for --token and --token-file
			}
			best = c
		}
	}
	return best
}

// flagNames lists fs's flags, aliases included.
func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// didYouMean is " (did you mean X?)" for the candidate suggest picks for
// name, with prefix before it (--), or "".
func didYouMean(name, prefix string, candidates []string) string {
	if s := suggest(name, candidates); s != "" {
		return " (did you mean " + prefix + s + "?)"
	}
	return ""
}

// editDistance is the optimal-string-alignment distance of a and b:
// insertions, deletions, substitutions and swaps of adjacent bytes.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
