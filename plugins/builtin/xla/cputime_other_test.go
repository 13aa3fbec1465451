//go:build !unix

package main

import "time"

// processCPU is not available here: the benchmarks report wall time only.
func processCPU() (time.Duration, bool) { return 0, false }
