package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// metricDef matches a metric's name where the source defines it: the Name
// of prometheus.*Opts, or the first argument of prometheus.NewDesc.
var metricDef = regexp.MustCompile(`(?:Name:\s*|NewDesc\()"(cachesvc_[a-z0-9_]+)"`)

// TestREADMEMetricNames holds README.md's Metrics (and fleet, Redis) text to
// the metrics the server defines, both ways: every cachesvc_* name the
// README mentions is defined somewhere in the server's source, and every
// metric the source defines is named in the README, so that an operator
// reading it can find each series /metrics shows.
func TestREADMEMetricNames(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile(`cachesvc_[a-z0-9_]+`).FindAllString(string(readme), -1) {
		documented[m] = true
	}
	defined := map[string]string{} // name -> file
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "third_party", "scripts", "clients", "web", "testdata", ".venv":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range metricDef.FindAllStringSubmatch(string(src), -1) {
			defined[m[1]] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(defined) < 40 {
		t.Fatalf("found only %d metric definitions in the source: the scan is broken", len(defined))
	}
	var undocumented, absent []string
	for name, file := range defined {
		if !documented[name] {
			undocumented = append(undocumented, name+" ("+file+")")
		}
	}
	for name := range documented {
		if strings.HasSuffix(name, "_") {
			// A family named by its prefix (`cachesvc_store_*`): some
			// metric must have it.
			found := false
			for d := range defined {
				found = found || strings.HasPrefix(d, name)
			}
			if !found {
				absent = append(absent, name+"*")
			}
			continue
		}
		if _, ok := defined[name]; !ok {
			absent = append(absent, name)
		}
	}
	slices.Sort(undocumented)
	slices.Sort(absent)
	if len(undocumented) > 0 {
		t.Errorf("metrics the server defines that README.md never names (add them to its Metrics section): %v", undocumented)
	}
	if len(absent) > 0 {
		t.Errorf("metric names README.md gives that no source defines (renamed or removed?): %v", absent)
	}
}

// TestREADMEAlerts holds README.md's "Monitoring" section to
// scripts/monitoring/alerts.yml: each alert there is explained in it, so an
// operator paged by one finds what it means.
func TestREADMEAlerts(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Monitoring\n")
	if !ok {
		t.Fatal(`README.md has no "## Monitoring" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rules, err := os.ReadFile(filepath.Join(root, "scripts", "monitoring", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) < 5 {
		t.Fatalf("found %d alerts in alerts.yml: the scan is broken", len(alerts))
	}
	for _, a := range alerts {
		if !strings.Contains(section, "`"+a[1]+"`") {
			t.Errorf("README's Monitoring section does not explain the alert %s", a[1])
		}
	}
}
