package main

import (
	"path/filepath"

	"github.com/cachesvc/cachesvc/manifest"
)

// runsConfig keeps run manifests in <data>/runs.json (saved every 30 s and
// at shutdown), beside the store, so they survive a restart.
func runsConfig(data string) manifest.Config {
	return manifest.Config{Path: filepath.Join(data, "runs.json")}
}
