package api_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/cachesvc/cachesvc/api/apitest"
	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/stats/statstest"
)

// processCPU returns the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// getLoop sends n GETs of url from conc goroutines over keep-alive
// connections and returns the elapsed time.
func getLoop(b *testing.B, hc *http.Client, url string, n, conc int) time.Duration {
	var wg sync.WaitGroup
	per := n / conc
	start := time.Now()
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set("X-Cachesvc-Run", "bench-run")
				resp, err := hc.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("GET: %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkGETStatsOverhead measures GET throughput of a 4 KiB entry with
// stats off and on, side by side: two real servers, measured in alternating
// rounds so that machine noise hits both alike. It reports requests/s of
// each, the on/off throughput ratio over all rounds and the median of the
// per-round ratios (1.0 = no cost), and the same ratio computed from the
// process CPU time per request, which other processes' load disturbs less.
//
//	go test -run '^$' -bench GETStatsOverhead -benchtime 20000x ./api/
func BenchmarkGETStatsOverhead(b *testing.B) {
	off := apitest.Start(b, apitest.Options{})
	on := statstest.Start(b, nil)
	body := bytes.Repeat([]byte("x"), 4096)
	key := statstest.Key(0, 0)
	for _, s := range []*apitest.Server{off, on.Server} {
		resp := s.Do(http.MethodPut, s.EntryURL("bench", key), bytes.NewReader(body), "X-Compile-Seconds", "3", "X-Cachesvc-Backend", "xla")
		apitest.ReadAll(b, resp)
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("PUT: %d", resp.StatusCode)
		}
	}
	const conc = 4
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc * 2}}
	// Warm up both.
	getLoop(b, hc, off.EntryURL("bench", key), 400, conc)
	getLoop(b, hc, on.EntryURL("bench", key), 400, conc)
	// Many short rounds in alternating order; the median of the per-round
	// ratios resists the bursts of load other processes cause.
	const round = 500
	rounds := max(2, b.N/round)
	var tOff, tOn, cpuOff, cpuOn time.Duration
	ratios := make([]float64, 0, rounds)
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		var dOff, dOn time.Duration
		runOff := func() {
			c := processCPU()
			dOff = getLoop(b, hc, off.EntryURL("bench", key), round, conc)
			cpuOff += processCPU() - c
		}
		runOn := func() {
			c := processCPU()
			dOn = getLoop(b, hc, on.EntryURL("bench", key), round, conc)
			cpuOn += processCPU() - c
		}
		if r%2 == 0 {
			runOff()
			runOn()
		} else {
			runOn()
			runOff()
		}
		tOff += dOff
		tOn += dOn
		ratios = append(ratios, dOff.Seconds()/dOn.Seconds())
	}
	b.StopTimer()
	sort.Float64s(ratios)
	n := float64(rounds * round)
	rpsOff, rpsOn := n/tOff.Seconds(), n/tOn.Seconds()
	b.ReportMetric(rpsOff, "req/s-off")
	b.ReportMetric(rpsOn, "req/s-on")
	b.ReportMetric(rpsOn/rpsOff, "on/off-total")
	b.ReportMetric(ratios[len(ratios)/2], "on/off-median")
	// CPU time of this process (client and both servers) per request: on 2
	// saturated cores throughput is inversely proportional to it, and other
	// processes' load does not inflate it the way it inflates wall time.
	b.ReportMetric(float64(cpuOff.Microseconds())/n, "cpu-us/req-off")
	b.ReportMetric(float64(cpuOn.Microseconds())/n, "cpu-us/req-on")
	b.ReportMetric(cpuOff.Seconds()/cpuOn.Seconds(), "on/off-cpu")
	if got := on.Stats().Snapshot(stats.SnapshotOptions{}).Totals.Lookups; got < int64(n) {
		b.Fatalf("stats counted %d lookups, want at least %d", got, int64(n))
	}
}

// BenchmarkHandlerGETStats calls the server's fasthttp handler directly (no
// sockets, no client: only the server's own work) for a GET hit of a 4 KiB
// entry, with stats off and on, in alternating rounds; it reports ns per
// request for each and the on/off throughput ratio.
//
//	go test -run '^$' -bench HandlerGETStats -benchtime 200000x ./api/
func BenchmarkHandlerGETStats(b *testing.B) {
	off := apitest.Start(b, apitest.Options{})
	on := statstest.Start(b, nil)
	body := bytes.Repeat([]byte("y"), 4096)
	key := statstest.Key(1, 1)
	type target struct {
		h   fasthttp.RequestHandler
		uri string
		ctx fasthttp.RequestCtx
	}
	var ts [2]*target
	for i, s := range []*apitest.Server{off, on.Server} {
		resp := s.Do(http.MethodPut, s.EntryURL("bench", key), bytes.NewReader(body), "X-Compile-Seconds", "3", "X-Cachesvc-Backend", "xla")
		apitest.ReadAll(b, resp)
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("PUT: %d", resp.StatusCode)
		}
		ts[i] = &target{h: s.API.App().Handler(), uri: "/v1/bench/entries/" + key}
	}
	w := bufio.NewWriter(io.Discard)
	one := func(t *target) {
		t.ctx.Request.Reset()
		t.ctx.Response.Reset()
		t.ctx.Request.Header.SetMethod(http.MethodGet)
		t.ctx.Request.SetRequestURI(t.uri)
		t.ctx.Request.Header.Set("X-Cachesvc-Run", "bench-run")
		t.h(&t.ctx)
		if err := t.ctx.Response.Write(w); err != nil {
			b.Fatal(err)
		}
		_ = w.Flush()
		if t.ctx.Response.StatusCode() != http.StatusOK {
			b.Fatalf("GET: %d", t.ctx.Response.StatusCode())
		}
	}
	const round = 2000
	rounds := max(2, b.N/round)
	var tOff, tOn, cpuOff, cpuOn time.Duration
	ratios := make([]float64, 0, rounds)
	for i := 0; i < 1000; i++ { // warm up
		one(ts[0])
		one(ts[1])
	}
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		var d [2]time.Duration
		order := [2]int{0, 1}
		if r%2 == 1 {
			order = [2]int{1, 0}
		}
		for _, i := range order {
			c, start := processCPU(), time.Now()
			for j := 0; j < round; j++ {
				one(ts[i])
			}
			d[i] = time.Since(start)
			if i == 0 {
				cpuOff += processCPU() - c
			} else {
				cpuOn += processCPU() - c
			}
		}
		tOff += d[0]
		tOn += d[1]
		ratios = append(ratios, d[0].Seconds()/d[1].Seconds())
	}
	b.StopTimer()
	sort.Float64s(ratios)
	n := float64(rounds * round)
	b.ReportMetric(float64(tOff.Nanoseconds())/n, "ns/req-off")
	b.ReportMetric(float64(tOn.Nanoseconds())/n, "ns/req-on")
	b.ReportMetric(tOff.Seconds()/tOn.Seconds(), "on/off-total")
	b.ReportMetric(ratios[len(ratios)/2], "on/off-median")
	b.ReportMetric(cpuOff.Seconds()/cpuOn.Seconds(), "on/off-cpu")
}
