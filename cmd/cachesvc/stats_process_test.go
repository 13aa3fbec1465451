package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/stats/statstest"
	"github.com/cachesvc/cachesvc/wire"
)

// TestStatsSurviveProcessRestart seeds a real `cachesvc serve` process with
// 1,000 lookups (750 hits), stops it with SIGTERM, starts a new process on
// the same data directory and checks /v1/stats, /metrics and `cachesvc
// stats` against the seeded numbers.
func TestStatsSurviveProcessRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	data := t.TempDir()
	p := startServer(t, bin, data)
	statstest.Seed(t, p.url)
	p.stop(t, 30*time.Second)

	p = startServer(t, bin, data)
	defer p.stop(t, 30*time.Second)
	st := serverStats(t, p.url)
	if tot := st.Totals; tot.Lookups != statstest.Lookups || tot.Hits != statstest.Hits || tot.CompileSecondsSaved != statstest.SavedSeconds || len(st.Runs) != 2 {
		t.Fatalf("after restart: totals %+v, %d runs", tot, len(st.Runs))
	}
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{
		`cachesvc_lookups_total{backend="xla",namespace="team-a",result="hit"} 375`,
		`cachesvc_lookups_total{backend="xla",namespace="team-b",result="miss"} 125`,
		`cachesvc_compile_seconds_saved_total{backend="xla",namespace="team-b"} 1500`,
	} {
		if !bytes.Contains(metrics, []byte(line+"\n")) {
			t.Errorf("/metrics after restart lacks %s", line)
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"stats", "--server", p.url}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("cachesvc stats: exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"Lookups     1,000  (hits 750, misses 250)", "75.0%", "sweep-2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("cachesvc stats output lacks %q:\n%s", want, out.String())
		}
	}
}

// serverStats returns the GET /v1/stats answer of the server at url.
func serverStats(t *testing.T, url string) wire.StatsResponse {
	t.Helper()
	resp, err := http.Get(url + "/v1/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st wire.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}
