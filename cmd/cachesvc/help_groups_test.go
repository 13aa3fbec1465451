package main

import (
	"bytes"
	"flag"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// helpHeadingRE matches a heading of a help's flag list: a line at the
// left margin ending in a colon, after the "Flags (...)" line.
var helpHeadingRE = regexp.MustCompile(`^(\S.*):$`)

// helpSections returns the flags a help text lists under each heading, in
// the order shown, and the headings in order.
func helpSections(help string) (titles []string, flags map[string][]string) {
	_, list, ok := strings.Cut(help, "\nFlags (each also from the environment variable shown):\n")
	if !ok {
		return nil, nil
	}
	flags = map[string][]string{}
	title := ""
	for _, line := range strings.Split(list, "\n") {
		if m := helpHeadingRE.FindStringSubmatch(line); m != nil {
			title = m[1]
			titles = append(titles, title)
			continue
		}
		if m := helpFlagRE.FindStringSubmatch(line); m != nil {
			flags[title] = append(flags[title], m[2])
		}
	}
	return titles, flags
}

// TestHelpFlagGroups: serve, with over 50 flags, and every command with
// more than 15 lists them under headings, the common ones first, so that an operator looking for the
// size limit or the shared tier's bucket finds it without reading every
// flag. Every flag it registers is under exactly one heading (a new flag
// must be given one: it does not land silently under "Other flags"), and
// the first heading holds what a new operator sets.
func TestHelpFlagGroups(t *testing.T) {
	type groupTest struct {
		cmd   string
		first string   // the first heading
		basic []string // flags it must hold
	}
	tests := []groupTest{
		{"serve", "Basics", []string{"addr", "data", "max-size", "tokens", "log-level", "log-format"}},
		{"admin list", "Which entries", []string{"namespace", "older-than", "min-size"}},
		{"admin delete", "Which entries", []string{"namespace", "keys-from", "all", "older-than"}},
		{"admin quarantine", "Which entries", []string{"namespace", "older-than"}},
		{"admin export", "Which entries", []string{"namespace", "older-than"}},
		{"key", "Output", []string{"json"}},
	}
	// A command with more flags than this is grouped too (admin export,
	// with as many as warm, is grouped like the other admin filters): a
	// new flag that takes one past it needs a row above.
	const groupAbove = 15
	for name, flags := range commandFlags { // help_test.go
		if len(flags) > groupAbove && !slices.ContainsFunc(tests, func(tc groupTest) bool { return tc.cmd == name }) {
			t.Errorf("%s has %d flags: give it groups in flagGroups (help.go) and a row here", name, len(flags))
		}
	}
	for _, tc := range tests {
		t.Run(tc.cmd, func(t *testing.T) {
			code, out, _, sets := helpRun(t, append(strings.Fields(tc.cmd), "--help")...)
			if code != 0 {
				t.Fatalf("exit %d", code)
			}
			titles, flags := helpSections(out)
			if len(titles) == 0 || titles[0] != tc.first {
				t.Fatalf("help's flag headings are %q, want %q first:\n%s", titles, tc.first, out)
			}
			for _, f := range tc.basic {
				if !slices.Contains(flags[tc.first], f) {
					t.Errorf("%q lacks --%s; it lists %q", tc.first, f, flags[tc.first])
				}
			}
			if got := flags[""]; len(got) > 0 {
				t.Errorf("help lists %q before any heading", got)
			}
			if got := flags[otherFlagsTitle]; len(got) > 0 {
				t.Errorf("flags %q have no group: add each to a group of %q in flagGroups (help.go)", got, tc.cmd)
			}
			seen := map[string]string{}
			for _, title := range titles {
				if len(flags[title]) == 0 {
					t.Errorf("heading %q lists no flag", title)
				}
				for _, f := range flags[title] {
					if prev, ok := seen[f]; ok {
						t.Errorf("--%s is listed under both %q and %q", f, prev, title)
					}
					seen[f] = title
				}
			}
			sets[tc.cmd].VisitAll(func(f *flag.Flag) {
				if _, ok := seen[f.Name]; !ok && !isAlias(f) {
					t.Errorf("--%s is under no heading", f.Name)
				}
			})
		})
	}
}

// TestHelpUngroupedFlag: a flag that a grouped command registers but its
// groups do not name is still shown, under "Other flags" at the end, and a
// group naming a flag the command lacks shows nothing for it: help never
// hides a flag, and TestHelpFlagGroups catches the missing group.
func TestHelpUngroupedFlag(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.String("addr", "", "address")
	fs.String("zeta", "", "new flag, no group")
	fs.Int("alpha", 0, "another")
	var b bytes.Buffer
	writeFlags(&b, fs, []flagGroup{{"Basics", []string{"alpha", "addr", "gone"}}})
	titles, flags := helpSections("\nFlags (each also from the environment variable shown):\n" + b.String())
	if want := []string{"Basics", otherFlagsTitle}; !slices.Equal(titles, want) {
		t.Errorf("headings %q, want %q:\n%s", titles, want, b.String())
	}
	if want := []string{"alpha", "addr"}; !slices.Equal(flags["Basics"], want) {
		t.Errorf("Basics lists %q, want %q (the group's order)", flags["Basics"], want)
	}
	if want := []string{"zeta"}; !slices.Equal(flags[otherFlagsTitle], want) {
		t.Errorf("%s lists %q, want %q", otherFlagsTitle, flags[otherFlagsTitle], want)
	}
}

// TestHelpDefaults: help shows a flag's default after its text; one that
// is the word "default" (the namespace flags) is quoted, since "(default
// default)" reads as a stutter, while other defaults stay bare as before.
func TestHelpDefaults(t *testing.T) {
	tests := []struct {
		cmd  string
		want string
	}{
		{"serve", "entries in (default \"default\")\n"},
		{"warm", "namespace of the entries (default \"default\")\n"},
		{"admin show", "namespace of the entries (default \"default\")\n"},
		{"serve", "(default 127.0.0.1:8080)\n"},
		{"serve", "(default auto)\n"},
		{"gc", "(default 30d)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.cmd+" "+tc.want, func(t *testing.T) {
			_, out, _, _ := helpRun(t, append(strings.Fields(tc.cmd), "--help")...)
			if !strings.Contains(out, tc.want) {
				t.Errorf("help lacks %q:\n%s", tc.want, out)
			}
			if strings.Contains(out, "(default default)") {
				t.Errorf("help shows \"(default default)\": quote it")
			}
		})
	}
}
