package web

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

func TestEmbeddedFilesArePresent(t *testing.T) {
	for _, name := range append(ownFiles(t), "vendor/uPlot.iife.min.js", "vendor/uPlot.min.css", "vendor/uPlot.LICENSE") {
		b, err := fs.ReadFile(FS(), name)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		if len(b) == 0 {
			t.Fatalf("%s is empty", name)
		}
	}
	lic, _ := fs.ReadFile(FS(), "vendor/uPlot.LICENSE")
	if !strings.Contains(string(lic), "MIT License") {
		t.Error("uPlot licence is not the MIT licence text")
	}
}

// TestDashboardWorksOffline checks that the page loads nothing from another
// origin: every script, stylesheet and image is served by cachesvc itself.
func TestDashboardWorksOffline(t *testing.T) {
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["'](https?:)?//`)
	importURL := regexp.MustCompile(`(?i)(@import|url\()\s*["']?(https?:)?//`)
	for _, name := range ownFiles(t) {
		b, err := fs.ReadFile(FS(), name)
		if err != nil {
			t.Fatal(err)
		}
		if m := external.Find(b); m != nil {
			t.Errorf("%s loads from another origin: %s", name, m)
		}
		if m := importURL.Find(b); m != nil {
			t.Errorf("%s imports from another origin: %s", name, m)
		}
	}
	idx, _ := fs.ReadFile(FS(), "index.html")
	// Relative references: behind a proxy that serves cachesvc under a
	// path prefix, "/assets/..." would leave it (TestDashboardUnderPathPrefix).
	if m := regexp.MustCompile(`(src|href)="/[^/]`).Find(idx); m != nil {
		t.Errorf("index.html references a root path (%s): make it relative to the page", m)
	}
	refs := []string{`"assets/vendor/uPlot.iife.min.js"`}
	for _, name := range ownFiles(t) {
		if name != "index.html" {
			refs = append(refs, `"assets/`+name+`"`)
		}
	}
	for _, ref := range refs {
		if !strings.Contains(string(idx), ref) {
			t.Errorf("index.html does not reference %s", ref)
		}
	}
}

// ownFiles lists the dashboard's own files (not vendor/).
func ownFiles(t *testing.T) []string {
	t.Helper()
	ents, err := fs.ReadDir(FS(), ".")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	if len(out) < 3 {
		t.Fatalf("dashboard files = %v, want index.html, style.css and the scripts", out)
	}
	return out
}

// TestDashboardStaysSmall bounds the dashboard's own files: each under 600
// lines (split a panel into its own script when one grows) and 96 KiB in
// all, with no build step and no dependency but the vendored uPlot.
func TestDashboardStaysSmall(t *testing.T) {
	total := 0
	for _, name := range ownFiles(t) {
		b, err := fs.ReadFile(FS(), name)
		if err != nil {
			t.Fatal(err)
		}
		total += len(b)
		if n := strings.Count(string(b), "\n"); n > 600 {
			t.Errorf("%s has %d lines: split it by panel", name, n)
		}
	}
	if total > 96<<10 {
		t.Errorf("the dashboard's own files are %d bytes, over 96 KiB", total)
	}
}
