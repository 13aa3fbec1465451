// Command soak drives a running cachesvc with a bounded mix of PUT, GET,
// lookup, batch, exists and keys requests for a number of minutes, checks
// every answer (status and content digest), and reports per minute the
// request count, errors, p50/p99 latency and the server's resident memory
// (VmRSS from /proc/PID/status). It exits 1 if any request failed.
//
// scripts/soak.sh builds and starts the server and runs this program; see
// README "Soak test".
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/cachesvc/cachesvc/client"
)

type options struct {
	url         string
	token       string
	ns          string
	pid         int
	minutes     float64
	workers     int
	rps         float64
	maxRequests int64
	programs    int
	maxSize     int
	batchKeys   int
	seed        uint64
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		os.Exit(2)
	}
	ok, err := run(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// parseFlags reads the command line; getenv supplies $CACHESVC_TOKEN and
// usage and errors go to out.
func parseFlags(args []string, getenv func(string) string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.url, "url", "http://127.0.0.1:8080", "server base URL")
	// Not the flag's default: -help prints defaults, and this one is a secret.
	fs.StringVar(&o.token, "token", "", "bearer token (default $CACHESVC_TOKEN)")
	fs.StringVar(&o.ns, "ns", "soak", "namespace")
	fs.IntVar(&o.pid, "pid", 0, "server PID whose RSS to sample (0: none)")
	fs.Float64Var(&o.minutes, "minutes", 10, "how long to run")
	fs.IntVar(&o.workers, "workers", 8, "concurrent clients")
	fs.Float64Var(&o.rps, "rps", 150, "request rate cap, all workers together")
	fs.Int64Var(&o.maxRequests, "max-requests", 0, "stop after this many requests (0: minutes × 60 × rps)")
	fs.IntVar(&o.programs, "programs", 2000, "distinct programs (keys) in play")
	fs.IntVar(&o.maxSize, "max-size", 512<<10, "largest entry in bytes (sizes are spread from 1 KiB up to this)")
	fs.IntVar(&o.batchKeys, "batch-keys", 16, "keys per batch request")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.token == "" {
		o.token = getenv("CACHESVC_TOKEN")
	}
	if o.maxRequests <= 0 {
		o.maxRequests = int64(o.minutes * 60 * o.rps)
	}
	return o, nil
}

// program is one simulated compiled program: a JAX-style key, its cache key
// (from POST keys) and deterministic content.
type program struct {
	index  uint64
	jaxKey string
	size   int
	sum    [32]byte
	key    atomic.Pointer[string]
	stored atomic.Bool
}

func (p *program) content(seed uint64) io.Reader {
	return io.LimitReader(&prng{r: rand.New(rand.NewPCG(seed, uint64(p.size)))}, int64(p.size))
}

type prng struct{ r *rand.Rand }

func (g *prng) Read(b []byte) (int, error) {
	for i := 0; i+8 <= len(b); i += 8 {
		v := g.r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(g.r.Uint32())
	}
	return len(b), nil
}

// minute accumulates one minute's results.
type minute struct {
	mu        sync.Mutex
	latencies map[string][]time.Duration
	errors    int
	firstErrs []string
}

func (m *minute) record(op string, d time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.latencies == nil {
		m.latencies = map[string][]time.Duration{}
	}
	m.latencies[op] = append(m.latencies[op], d)
	if err != nil {
		m.errors++
		if len(m.firstErrs) < 5 {
			m.firstErrs = append(m.firstErrs, op+": "+err.Error())
		}
	}
}

type runner struct {
	o      options
	cli    *client.Client
	hc     *http.Client
	progs  []*program
	seed   uint64
	cur    atomic.Pointer[minute]
	issued atomic.Int64
}

func run(o options) (bool, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.workers * 2, IdleConnTimeout: 90 * time.Second}}
	cli, err := client.New(client.Config{BaseURL: o.url, HTTPClient: hc, Token: o.token, Run: "soak"})
	if err != nil {
		return false, err
	}
	r := &runner{o: o, cli: cli, hc: hc, seed: o.seed}
	rnd := rand.New(rand.NewPCG(o.seed, 0))
	for i := 0; i < o.programs; i++ {
		// Sizes spread log-uniformly from 1 KiB to maxSize.
		size := int(1024 * math.Pow(2, rnd.Float64()*math.Log2(float64(o.maxSize)/1024)))
		p := &program{index: uint64(i), jaxKey: fmt.Sprintf("jit_soak_%d-%064x", i, i), size: size}
		h := sha256.New()
		io.Copy(h, p.content(o.seed+uint64(i)))
		copy(p.sum[:], h.Sum(nil))
		r.progs = append(r.progs, p)
	}
	limiter := rate.NewLimiter(rate.Limit(o.rps), o.workers)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(o.minutes*float64(time.Minute)))
	defer cancel()

	fmt.Printf("soak: %s ns=%s for %.1f min, %d workers, ≤%.0f req/s, ≤%d requests, %d programs up to %d bytes\n",
		o.url, o.ns, o.minutes, o.workers, o.rps, o.maxRequests, o.programs, o.maxSize)
	fmt.Printf("%-6s %8s %6s %9s %9s %9s %9s %9s %9s %10s\n", "minute", "requests", "errors", "p50 ms", "p99 ms", "get p99", "put p99", "look p99", "batch p99", "rss MiB")

	r.cur.Store(&minute{})
	var wg sync.WaitGroup
	for w := 0; w < o.workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			wr := rand.New(rand.NewPCG(o.seed, uint64(w)+1))
			for ctx.Err() == nil && r.issued.Add(1) <= o.maxRequests {
				if limiter.Wait(ctx) != nil {
					return
				}
				r.one(ctx, wr)
			}
		}(w)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	totalReq, totalErr := 0, 0
	var rss []float64
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	n := 0
	report := func() {
		n++
		m := r.cur.Swap(&minute{})
		req, e := m.report(n, r.rss())
		totalReq += req
		totalErr += e
		rss = append(rss, r.rss())
	}
	for running := true; running; {
		select {
		case <-tick.C:
			report()
		case <-done:
			running = false
		}
	}
	report()
	fmt.Printf("total: %d requests, %d errors", totalReq, totalErr)
	if len(rss) > 1 && rss[0] > 0 {
		fmt.Printf(", server RSS %.1f MiB after minute 1, %.1f MiB at the end (max %.1f)", rss[0], rss[len(rss)-1], slices.Max(rss))
	}
	fmt.Println()
	return totalErr == 0, nil
}

func (m *minute) report(n int, rss float64) (int, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []time.Duration
	for _, l := range m.latencies {
		all = append(all, l...)
	}
	p := func(l []time.Duration, q float64) string {
		if len(l) == 0 {
			return "-"
		}
		slices.Sort(l)
		return fmt.Sprintf("%.1f", float64(l[min(len(l)-1, int(q*float64(len(l))))].Microseconds())/1000)
	}
	fmt.Printf("%-6d %8d %6d %9s %9s %9s %9s %9s %9s %10.1f\n", n, len(all), m.errors,
		p(all, 0.50), p(all, 0.99), p(m.latencies["get"], 0.99), p(m.latencies["put"], 0.99),
		p(m.latencies["lookup"], 0.99), p(m.latencies["batch"], 0.99), rss)
	for _, e := range m.firstErrs {
		fmt.Println("  error:", e)
	}
	return len(all), m.errors
}

// rss returns the server's VmRSS in MiB, 0 if unknown.
func (r *runner) rss() float64 {
	if r.o.pid <= 0 {
		return 0
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", r.o.pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// one issues one random request and records its latency and outcome.
func (r *runner) one(ctx context.Context, rnd *rand.Rand) {
	p := r.progs[rnd.IntN(len(r.progs))]
	op := "get"
	switch x := rnd.IntN(100); {
	case x < 20:
		op = "put"
	case x < 60:
		op = "get"
	case x < 75:
		op = "lookup"
	case x < 85:
		op = "batch"
	case x < 95:
		op = "exists"
	default:
		op = "keys"
	}
	if op != "put" && op != "keys" && op != "batch" && op != "exists" && !p.stored.Load() {
		op = "put"
	}
	start := time.Now()
	var err error
	switch op {
	case "put":
		err = r.put(ctx, p)
	case "get":
		err = r.get(ctx, p)
	case "lookup":
		err = r.lookup(ctx, p)
	case "batch":
		err = r.batch(ctx, rnd)
	case "exists":
		err = r.exists(ctx, rnd)
	case "keys":
		_, err = r.key(ctx, p)
	}
	if ctx.Err() != nil && err != nil {
		return // cut off by the end of the run, not a failure
	}
	r.cur.Load().record(op, time.Since(start), err)
}

func (r *runner) key(ctx context.Context, p *program) (string, error) {
	if k := p.key.Load(); k != nil {
		return *k, nil
	}
	kr, err := r.cli.Keys(ctx, r.o.ns, client.JAXKeySignature(p.jaxKey))
	if err != nil {
		return "", err
	}
	p.key.Store(&kr.Key)
	return kr.Key, nil
}

func (r *runner) put(ctx context.Context, p *program) error {
	k, err := r.key(ctx, p)
	if err != nil {
		return err
	}
	_, err = r.cli.Put(ctx, r.o.ns, k, p.content(r.seed+p.index), client.PutOptions{
		Size: int64(p.size), SHA256: p.sum[:], Backend: "passthrough", Name: p.jaxKey})
	if err == nil {
		p.stored.Store(true)
	}
	return err
}

func checkBody(resp *http.Response, p *program) error {
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		return fmt.Errorf("read body after %d bytes: %w", n, err)
	}
	if got := h.Sum(nil); !bytes.Equal(got, p.sum[:]) {
		return fmt.Errorf("content of %s: got sha256 %x (%d bytes), want %x", p.jaxKey, got, n, p.sum)
	}
	return nil
}

func (r *runner) get(ctx context.Context, p *program) error {
	k, err := r.key(ctx, p)
	if err != nil {
		return err
	}
	resp, err := r.cli.Get(ctx, r.o.ns, k, 0)
	if err != nil {
		return err
	}
	return checkBody(resp, p)
}

func (r *runner) lookup(ctx context.Context, p *program) error {
	body, _ := json.Marshal(client.JAXKeySignature(p.jaxKey))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.o.url+"/v1/"+r.o.ns+"/lookup", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if r.o.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.o.token)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return fmt.Errorf("lookup %s: status %d: %s", p.jaxKey, resp.StatusCode, b)
	}
	return checkBody(resp, p)
}

// sample picks up to n distinct programs whose key is known, keyed by it.
func (r *runner) sample(rnd *rand.Rand, n int) map[string]*program {
	out := map[string]*program{}
	for try := 0; try < 4*n && len(out) < n; try++ {
		p := r.progs[rnd.IntN(len(r.progs))]
		if k := p.key.Load(); k != nil {
			out[*k] = p
		}
	}
	return out
}

func (r *runner) batch(ctx context.Context, rnd *rand.Rand) error {
	want := r.sample(rnd, r.o.batchKeys)
	if len(want) == 0 {
		return nil
	}
	// Snapshot which were stored before the request: those must come back.
	stored := map[string]bool{}
	keys := make([]string, 0, len(want))
	for k, p := range want {
		keys = append(keys, k)
		stored[k] = p.stored.Load()
	}
	got := map[string]bool{}
	missing, err := r.cli.Batch(ctx, r.o.ns, keys, func(m client.Member, body io.Reader) error {
		p := want[m.Key]
		if p == nil {
			return fmt.Errorf("batch returned unrequested key %s", m.Key)
		}
		h := sha256.New()
		if _, err := io.Copy(h, body); err != nil {
			return err
		}
		if !bytes.Equal(h.Sum(nil), p.sum[:]) {
			return fmt.Errorf("batch member %s: wrong content", m.Key)
		}
		got[m.Key] = true
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range missing {
		if stored[k] {
			return fmt.Errorf("batch says stored key %s is missing", k)
		}
	}
	if len(got)+len(missing) != len(keys) {
		return fmt.Errorf("batch accounted for %d of %d keys", len(got)+len(missing), len(keys))
	}
	return nil
}

func (r *runner) exists(ctx context.Context, rnd *rand.Rand) error {
	want := r.sample(rnd, r.o.batchKeys)
	if len(want) == 0 {
		return nil
	}
	keys := make([]string, 0, len(want))
	stored := map[string]bool{}
	for k, p := range want {
		keys = append(keys, k)
		stored[k] = p.stored.Load()
	}
	_, missing, err := r.cli.Exists(ctx, r.o.ns, keys)
	if err != nil {
		return err
	}
	for _, k := range missing {
		if stored[k] {
			return fmt.Errorf("exists says stored key %s is missing", k)
		}
	}
	return nil
}
