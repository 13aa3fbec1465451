//go:build !race

package pluginstest

const raceEnabled = false
