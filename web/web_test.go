package web

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

func TestEmbeddedFilesArePresent(t *testing.T) {
	for _, name := range []string{"index.html", "app.js", "style.css", "vendor/uPlot.iife.min.js", "vendor/uPlot.min.css", "vendor/uPlot.LICENSE"} {
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
	for _, name := range []string{"index.html", "app.js", "style.css"} {
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
	for _, ref := range []string{"/assets/vendor/uPlot.iife.min.js", "/assets/app.js", "/assets/style.css"} {
		if !strings.Contains(string(idx), ref) {
			t.Errorf("index.html does not reference %s", ref)
		}
	}
}
