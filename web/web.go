// Package web holds the dashboard's static files, embedded in the binary so
// that the dashboard works offline (no CDN). The api package serves them at
// "/"; the page reads GET /v1/stats and GET /v1/{ns}/misses.
package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// FS returns the dashboard's files: index.html at the root, style.css, the
// scripts (util.js, charts.js, tables.js, runs.js, fleet.js and app.js,
// which wires them) and vendor/ (uPlot, with its licence).
func FS() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic("web: embedded static directory missing: " + err.Error())
	}
	return sub
}
