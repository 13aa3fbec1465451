package main

import (
	"path/filepath"

	"github.com/cachesvc/cachesvc/api/runlog"
)

// runsConfig keeps run manifests in <data>/runs.json (saved every 30 s and
// at shutdown), beside the store, so they survive a restart.
func runsConfig(data string) runlog.Config {
	return runlog.Config{Path: filepath.Join(data, "runs.json")}
}
