// Command batch measures POST /v1/{ns}/batch against sequential GETs: N
// entries of SIZE bytes fetched by one batch request vs N GETs one after the
// other on one keep-alive connection. It prints the median of several rounds
// and the ratio. Both methods check each entry's SHA-256, as a real client
// does. BENCH_CPUPROFILE=file profiles the timed rounds.
//
// Usage:
//
//	go run ./scripts/bench/batch                 # in-process server, real Badger in a temp dir
//	go run ./scripts/bench/batch -server URL     # an already running server
//	go run ./scripts/bench/batch -rtt 500us      # through a loopback proxy adding 0.5 ms per round trip
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/store"
)

func main() {
	server := flag.String("server", "", "server URL (default: start one in-process on a temp dir)")
	ns := flag.String("ns", "bench-batch", "namespace")
	n := flag.Int("n", 1000, "entries")
	size := flag.Int("size", 64<<10, "bytes per entry")
	rounds := flag.Int("rounds", 5, "rounds of each method (median reported)")
	asJSON := flag.Bool("json", false, "print one JSON object")
	rtt := flag.Duration("rtt", 0, "emulate this network round-trip time with a loopback proxy (e.g. 500us); 0 = plain loopback")
	flag.Parse()
	if err := run(*server, *ns, *n, *size, *rounds, *rtt, *asJSON); err != nil {
		fmt.Fprintln(os.Stderr, "bench batch:", err)
		os.Exit(1)
	}
}

func run(server, ns string, n, size, rounds int, rtt time.Duration, asJSON bool) error {
	inProcess := server == ""
	if inProcess {
		url, stop, err := startServer()
		if err != nil {
			return err
		}
		defer stop()
		server = url
	}
	ctx := context.Background()
	// Entries are stored directly; only the timed fetches go through the
	// latency proxy.
	direct, err := client.New(client.Config{BaseURL: server})
	if err != nil {
		return err
	}
	if rtt > 0 {
		u, err := neturl.Parse(server)
		if err != nil {
			return err
		}
		p, err := startLatencyProxy(u.Host, rtt)
		if err != nil {
			return err
		}
		defer p.Close()
		server = "http://" + p.Addr()
	}
	// One connection: sequential GETs reuse it (keep-alive).
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, DisableCompression: true}}
	cl, err := client.New(client.Config{BaseURL: server, HTTPClient: hc})
	if err != nil {
		return err
	}
	keys := make([]string, n)
	body := make([]byte, size)
	for i := range keys {
		rand.Read(body)
		sum := sha256.Sum256(body)
		keys[i] = fmt.Sprintf("%x", sha256.Sum256(append([]byte("bench-batch-"), sum[:]...)))
		if _, err := direct.Put(ctx, ns, keys[i], bytes.NewReader(body), client.PutOptions{Size: int64(size), SHA256: sum[:]}); err != nil {
			return fmt.Errorf("put: %w", err)
		}
	}
	if p := os.Getenv("BENCH_CPUPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	var seqTimes, batchTimes []time.Duration
	var seqCPU, batchCPU []time.Duration
	for r := 0; r < rounds; r++ {
		t0, c0 := time.Now(), cpuTime()
		var total int64
		for _, k := range keys {
			resp, err := cl.Get(ctx, ns, k, 0)
			if err != nil {
				return fmt.Errorf("get: %w", err)
			}
			h := sha256.New()
			m, err := io.Copy(h, resp.Body)
			resp.Body.Close()
			if err != nil {
				return fmt.Errorf("read get: %w", err)
			}
			if got := fmt.Sprintf("%x", h.Sum(nil)); got != resp.Header.Get("X-Content-SHA256") {
				return fmt.Errorf("get %s: sha256 %s, header says %s", k, got, resp.Header.Get("X-Content-SHA256"))
			}
			total += m
		}
		seqTimes = append(seqTimes, time.Since(t0))
		seqCPU = append(seqCPU, cpuTime()-c0)
		if total != int64(n*size) {
			return fmt.Errorf("sequential GETs read %d bytes, want %d", total, n*size)
		}

		t0, c0 = time.Now(), cpuTime()
		total = 0
		count := 0
		missing, err := cl.Batch(ctx, ns, keys, func(m client.Member, r io.Reader) error {
			k, err := io.Copy(io.Discard, r)
			total += k
			count++
			return err
		})
		if err != nil {
			return fmt.Errorf("batch: %w", err)
		}
		batchTimes = append(batchTimes, time.Since(t0))
		batchCPU = append(batchCPU, cpuTime()-c0)
		if count != n || len(missing) != 0 || total != int64(n*size) {
			return fmt.Errorf("batch returned %d members (%d bytes), %d missing", count, total, len(missing))
		}
	}
	// The round trip a tiny request actually pays (the proxy's sleeps are
	// coarser than asked on a busy machine).
	var pings []time.Duration
	for i := 0; i < 50; i++ {
		t0 := time.Now()
		resp, err := hc.Get(server + "/healthz")
		if err != nil {
			return fmt.Errorf("healthz: %w", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		pings = append(pings, time.Since(t0))
	}
	ping := median(pings)
	seq, batch := median(seqTimes), median(batchTimes)
	ratio := seq.Seconds() / batch.Seconds()
	mb := float64(n*size) / (1 << 20)
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(map[string]any{
			"entries": n, "entry_bytes": size, "rounds": rounds, "rtt_seconds": rtt.Seconds(), "measured_small_request_seconds": ping.Seconds(),
			"sequential_get_seconds": seq.Seconds(), "batch_seconds": batch.Seconds(), "ratio": ratio,
		})
	}
	fmt.Printf("%d entries x %d bytes (%.1f MiB), median of %d rounds, emulated RTT %s\n", n, size, mb, rounds, rtt)
	fmt.Printf("  small request round trip (GET /healthz, median): %.3f ms\n", ms(ping))
	fmt.Printf("  %d sequential GETs, one keep-alive connection: %8.1f ms  (%6.1f MiB/s, %.0f req/s)\n", n, ms(seq), mb/seq.Seconds(), float64(n)/seq.Seconds())
	fmt.Printf("  1 batch request (tar stream):                %8.1f ms  (%6.1f MiB/s)\n", ms(batch), mb/batch.Seconds())
	fmt.Printf("  ratio sequential/batch: %.2fx (wall time)\n", ratio)
	if inProcess {
		fmt.Printf("  CPU time of this process (client and in-process server), median: GETs %.1f ms, batch %.1f ms, ratio %.2fx\n",
			ms(median(seqCPU)), ms(median(batchCPU)), median(seqCPU).Seconds()/median(batchCPU).Seconds())
	}
	return nil
}

// cpuTime is the user+system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// startServer serves the API on 127.0.0.1:0 over a Badger store in a temp dir.
func startServer() (string, func(), error) {
	dir, err := os.MkdirTemp("", "cachesvc-bench-batch-")
	if err != nil {
		return "", nil, err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(store.Config{Dir: dir, Logger: log})
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("open store: %w", err)
	}
	srv, err := api.New(api.Config{Store: st, Logger: log})
	if err != nil {
		st.Close()
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("new server: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go srv.Serve(ln)
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		st.Close()
		os.RemoveAll(dir)
	}
	return "http://" + ln.Addr().String(), stop, nil
}
