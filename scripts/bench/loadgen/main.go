// Command loadgen drives HTTP load against cachesvc or a baseline (nginx with
// WebDAV PUT, or bazel-remote's HTTP CAS) and prints one JSON result per run.
//
// It is the measuring half of scripts/bench/run.sh: the same generator, the
// same sizes and the same concurrency hit every server in one run, so the
// ratios in BENCHMARKS.md compare like with like on the same machine.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxSamples bounds the latency samples kept per run; past it, samples are
// dropped (counts and throughput stay exact) so memory stays bounded.
const maxSamples = 4 << 20

// Result is one measured run, printed as a JSON line.
type Result struct {
	Name        string  `json:"name"`
	Target      string  `json:"target"`
	Mode        string  `json:"mode"`
	Size        int64   `json:"size"`
	Concurrency int     `json:"concurrency"`
	Requests    int64   `json:"requests"`
	Errors      int64   `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	Seconds     float64 `json:"seconds"`
	RPS         float64 `json:"rps"`
	MBps        float64 `json:"mb_per_s"`
	P50ms       float64 `json:"p50_ms"`
	P90ms       float64 `json:"p90_ms"`
	P99ms       float64 `json:"p99_ms"`
	// UpBytes is what one request sends (request line, headers, body), for
	// lookups: a digest-first lookup's whole point is to make it small.
	UpBytes int64 `json:"up_bytes_per_req,omitempty"`
}

type config struct {
	target   string
	base     string
	ns       string
	mode     string
	name     string
	size     int64
	entries  int
	conc     int
	duration time.Duration
	requests int64
	sigFile  string
	batch    int
	seed     string
	digest   bool
	cas      *casBodies // bazel-remote only: bodies whose SHA-256 is the key
}

func main() {
	var cfg config
	fs := flag.NewFlagSet("loadgen", flag.ExitOnError)
	fs.StringVar(&cfg.target, "target", "cachesvc", "server kind: cachesvc, nginx or bazel-remote (any label starting with cachesvc is a cachesvc)")
	fs.StringVar(&cfg.base, "url", "http://127.0.0.1:8080", "server base URL")
	fs.StringVar(&cfg.ns, "ns", "bench", "cachesvc namespace")
	fs.StringVar(&cfg.mode, "mode", "get", "preload | get | put | lookup | batch | seq")
	fs.StringVar(&cfg.name, "name", "", "label for the result (default: mode-size-c)")
	fs.Int64Var(&cfg.size, "size", 4096, "entry size in bytes")
	fs.IntVar(&cfg.entries, "entries", 100, "number of distinct entries (preload, get, batch, seq)")
	fs.IntVar(&cfg.conc, "c", 1, "concurrent connections")
	fs.DurationVar(&cfg.duration, "d", 10*time.Second, "how long to run (get, put, lookup; batch and seq repeat whole passes over the entries for at least this long, one pass at least)")
	fs.Int64Var(&cfg.requests, "n", 0, "stop after this many requests (0: only the duration bounds the run)")
	fs.StringVar(&cfg.sigFile, "signature", "", "lookup: JSON signature file to POST (go run ./scripts/bench/gensig); an entry must be stored under its key: the run measures hits")
	fs.IntVar(&cfg.batch, "batch", 1000, "batch: keys per batch request")
	fs.StringVar(&cfg.seed, "seed", "bench", "seed that derives keys and contents")
	fs.BoolVar(&cfg.digest, "digest", false, "lookup: send only the signature's SHA-256 (digest-first), not its bytes")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: loadgen [flags]\n\nDrives one load run against cachesvc, nginx or bazel-remote and prints a JSON result line.\n\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	switch {
	case isCachesvc(cfg.target), cfg.target == "nginx":
	case cfg.target == "bazel-remote":
		cfg.cas = newCASBodies(cfg)
	default:
		fatalf("-target must be cachesvc, nginx or bazel-remote, got %q", cfg.target)
	}
	if cfg.conc < 1 || cfg.entries < 1 || cfg.size < 0 {
		fatalf("-c and -entries must be at least 1 and -size not negative")
	}
	if cfg.name == "" {
		cfg.name = fmt.Sprintf("%s-%d-c%d", cfg.mode, cfg.size, cfg.conc)
	}
	ctx := context.Background()
	var (
		res Result
		err error
	)
	switch cfg.mode {
	case "preload":
		res, err = preload(ctx, cfg)
	case "get":
		res, err = runLoad(ctx, cfg, getOp)
	case "put":
		res, err = runLoad(ctx, cfg, putOp)
	case "lookup":
		res, err = runLookup(ctx, cfg)
	case "batch":
		res, err = batchPasses(ctx, cfg)
	case "seq":
		res, err = sequential(ctx, cfg)
	default:
		fatalf("unknown -mode %q", cfg.mode)
	}
	if err != nil {
		fatalf("%s: %v", cfg.mode, err)
	}
	res.Name, res.Target, res.Mode, res.Size, res.Concurrency = cfg.name, cfg.target, cfg.mode, cfg.size, cfg.conc
	_ = json.NewEncoder(os.Stdout).Encode(res)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "loadgen: "+format+"\n", args...)
	os.Exit(2)
}

// key derives the i-th entry's key from the seed and size, so the preload and
// the load runs agree without sharing state.
func key(cfg config, i int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d/%d", cfg.seed, cfg.size, i)))
	return hex.EncodeToString(sum[:])
}

// isCachesvc reports whether target names a cachesvc instance: run.sh labels
// a second one "cachesvc-sync" (started with --sync-writes).
func isCachesvc(target string) bool { return strings.HasPrefix(target, "cachesvc") }

// entryURL is where entry i lives on the target. bazel-remote's CAS checks
// that a blob's SHA-256 is its key, so there the key is derived from the body.
func entryURL(cfg config, i int) string {
	switch cfg.target {
	case "nginx":
		return cfg.base + "/blobs/" + key(cfg, i)
	case "bazel-remote":
		return cfg.base + "/cas/" + cfg.cas.digest(cfg, i)
	}
	return cfg.base + "/v1/" + cfg.ns + "/entries/" + key(cfg, i)
}

// body is entry i's content as sent to the target.
func body(cfg config, i int) io.Reader {
	if cfg.cas != nil {
		return cfg.cas.body(cfg, i)
	}
	return newContent(cfg, i, cfg.size)
}

// content is a deterministic, incompressible-enough body for entry i.
type content struct {
	block [4096]byte
	left  int64
	off   int
}

func newContent(cfg config, i int, size int64) *content {
	c := &content{left: size}
	seed := sha256.Sum256([]byte(fmt.Sprintf("content/%s/%d", key(cfg, i), size)))
	for j := 0; j < len(c.block); j += len(seed) {
		copy(c.block[j:], seed[:])
		seed = sha256.Sum256(seed[:])
	}
	return c
}

func (c *content) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && c.left > 0 {
		m := copy(p[n:], c.block[c.off:])
		if int64(m) > c.left {
			m = int(c.left)
		}
		n += m
		c.left -= int64(m)
		c.off = (c.off + m) % len(c.block)
	}
	return n, nil
}

func client(conc int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        conc * 2,
		MaxIdleConnsPerHost: conc * 2,
		MaxConnsPerHost:     conc,
		DisableCompression:  true,
		IdleConnTimeout:     time.Minute,
	}}
}

func put(ctx context.Context, hc *http.Client, cfg config, i int) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, entryURL(cfg, i), body(cfg, i))
	if err != nil {
		return 0, err
	}
	req.ContentLength = cfg.size
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	// 200 from cachesvc for an identical entry, 204 from nginx for an
	// existing file and bazel-remote's 200 all mean the bytes are there; for
	// this benchmark an identical re-PUT is a success (cachesvc's 409, other
	// bytes under the key, is not).
	if resp.StatusCode/100 != 2 {
		return 0, fmt.Errorf("PUT %s: %s", req.URL.Path, resp.Status)
	}
	return cfg.size, nil
}

func preload(ctx context.Context, cfg config) (Result, error) {
	hc := client(cfg.conc)
	var next atomic.Int64
	g, errs := sync.WaitGroup{}, make(chan error, cfg.conc)
	start := time.Now()
	for w := 0; w < cfg.conc; w++ {
		g.Add(1)
		go func() {
			defer g.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.entries {
					return
				}
				if _, err := put(ctx, hc, cfg, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	g.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return Result{}, err
	}
	secs := time.Since(start).Seconds()
	return Result{Requests: int64(cfg.entries), Seconds: secs, RPS: float64(cfg.entries) / secs}, nil
}

// op performs request number n of worker w and returns the bytes moved.
type op func(ctx context.Context, hc *http.Client, cfg config, w int, n int64) (int64, error)

func getOp(ctx context.Context, hc *http.Client, cfg config, w int, n int64) (int64, error) {
	i := int((n*7919 + int64(w)) % int64(cfg.entries))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, entryURL(cfg, i), nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	got, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return got, err
	}
	if resp.StatusCode != http.StatusOK || got != cfg.size {
		return got, fmt.Errorf("GET %s: %s with %d bytes, want 200 with %d", req.URL.Path, resp.Status, got, cfg.size)
	}
	return got, nil
}

// putOp writes fresh entries: each worker owns a disjoint key range so no
// request is an identical re-upload.
func putOp(ctx context.Context, hc *http.Client, cfg config, w int, n int64) (int64, error) {
	return put(ctx, hc, cfg, 1_000_000+w*10_000_000+int(n))
}

// lookup is what every lookup of a run sends: the signature, or with
// -digest only its SHA-256 (X-Cachesvc-Signature-Sha256, the xla backend) and
// an empty body, which cachesvc answers from its signature memo.
type lookup struct {
	sig    []byte
	digest string
}

func (l lookup) request(ctx context.Context, cfg config) (*http.Request, error) {
	var b io.Reader = bytes.NewReader(l.sig)
	if cfg.digest {
		b = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.base+"/v1/"+cfg.ns+"/lookup", b)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if cfg.digest {
		req.Header.Set("X-Cachesvc-Signature-Sha256", l.digest)
		req.Header.Set("X-Cachesvc-Backend", "xla")
	}
	return req, nil
}

// upBytes is the size of one request as the client writes it.
func (l lookup) upBytes(cfg config) (int64, error) {
	req, err := l.request(context.Background(), cfg)
	if err != nil {
		return 0, err
	}
	dump, err := httputil.DumpRequestOut(req, true)
	return int64(len(dump)), err
}

func lookupOp(ctx context.Context, hc *http.Client, cfg config, l lookup) (int64, error) {
	req, err := l.request(ctx, cfg)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	got, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return got, err
	}
	if resp.StatusCode == http.StatusPreconditionRequired {
		return got, errors.New("lookup: 428: the server's memo does not know this digest (run one full lookup first)")
	}
	if resp.StatusCode == http.StatusNotFound {
		return got, errors.New("lookup: 404, a miss: the lookup figures are hits; PUT an entry under the signature's key (POST /v1/{ns}/keys) first, as run.sh's sig_for does")
	}
	if resp.StatusCode != http.StatusOK {
		return got, fmt.Errorf("lookup: %s", resp.Status)
	}
	return got, nil
}

func runLookup(ctx context.Context, cfg config) (Result, error) {
	if !isCachesvc(cfg.target) {
		return Result{}, errors.New("lookup runs only against cachesvc")
	}
	if cfg.sigFile == "" {
		return Result{}, errors.New("-mode lookup needs -signature FILE, a JSON signature to POST; make one with: go run ./scripts/bench/gensig -size 1MiB -o sig.json")
	}
	sig, err := os.ReadFile(cfg.sigFile)
	if err != nil {
		return Result{}, fmt.Errorf("read -signature: %w", err)
	}
	sum := sha256.Sum256(sig)
	l := lookup{sig: sig, digest: hex.EncodeToString(sum[:])}
	up, err := l.upBytes(cfg)
	if err != nil {
		return Result{}, err
	}
	res, err := runLoad(ctx, cfg, func(ctx context.Context, hc *http.Client, cfg config, _ int, _ int64) (int64, error) {
		return lookupOp(ctx, hc, cfg, l)
	})
	res.UpBytes = up
	return res, err
}

func runLoad(ctx context.Context, cfg config, do op) (Result, error) {
	hc := client(cfg.conc)
	ctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	var (
		reqs, errs, moved atomic.Int64
		issued            atomic.Int64 // requests started, for -n
		firstErr          atomic.Value
		mu                sync.Mutex
		samples           = make([]time.Duration, 0, 1<<16)
		wg                sync.WaitGroup
	)
	start := time.Now()
	for w := 0; w < cfg.conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			local := make([]time.Duration, 0, 1024)
			flush := func() {
				mu.Lock()
				if room := maxSamples - len(samples); room > 0 {
					samples = append(samples, local[:min(room, len(local))]...)
				}
				mu.Unlock()
				local = local[:0]
			}
			defer flush()
			for n := int64(0); ctx.Err() == nil; n++ {
				// Claim a request before starting it, so that -n bounds
				// the run even when more workers than -n start at once.
				if cfg.requests > 0 && issued.Add(1) > cfg.requests {
					return
				}
				t0 := time.Now()
				b, err := do(ctx, hc, cfg, w, n)
				if ctx.Err() != nil && err != nil {
					return // the run's deadline cut this request short
				}
				reqs.Add(1)
				moved.Add(b)
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				local = append(local, time.Since(t0))
				if len(local) == cap(local) {
					flush()
				}
			}
		}(w)
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	res := Result{Requests: reqs.Load(), Errors: errs.Load(), Seconds: secs}
	if v, ok := firstErr.Load().(string); ok {
		res.FirstError = v
	}
	res.RPS = float64(res.Requests-res.Errors) / secs
	res.MBps = float64(moved.Load()) / secs / 1e6
	res.P50ms, res.P90ms, res.P99ms = percentiles(samples)
	return res, nil
}

func percentiles(d []time.Duration) (p50, p90, p99 float64) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(q float64) float64 {
		return float64(d[min(len(d)-1, int(q*float64(len(d))))].Microseconds()) / 1000
	}
	return at(0.50), at(0.90), at(0.99)
}

// passes repeats pass (one fetch of every entry) until cfg.duration has
// passed, at least once: one pass of 1,000 small entries takes a fraction of
// a second on loopback, too short for a steady figure. It returns the number
// of passes and the seconds they took.
func passes(cfg config, pass func() error) (int, float64, error) {
	start := time.Now()
	n := 0
	for n == 0 || time.Since(start) < cfg.duration {
		if err := pass(); err != nil {
			return n, 0, err
		}
		n++
	}
	return n, time.Since(start).Seconds(), nil
}

// batchPasses fetches cfg.entries keys in batch requests of cfg.batch keys,
// in passes (see passes), and checks that every member arrived.
func batchPasses(ctx context.Context, cfg config) (Result, error) {
	if !isCachesvc(cfg.target) {
		return Result{}, errors.New("batch runs only against cachesvc")
	}
	hc := client(1)
	var moved int64
	n, secs, err := passes(cfg, func() error { return batchPass(ctx, cfg, hc, &moved) })
	if err != nil {
		return Result{}, err
	}
	reqs := int64(n) * int64(cfg.entries)
	return Result{Requests: reqs, Seconds: secs, RPS: float64(reqs) / secs, MBps: float64(moved) / secs / 1e6}, nil
}

// batchPass fetches every entry once in batch requests, adding the bytes
// received to *moved.
func batchPass(ctx context.Context, cfg config, hc *http.Client, moved *int64) error {
	for lo := 0; lo < cfg.entries; lo += cfg.batch {
		keys := make([]string, 0, cfg.batch)
		for i := lo; i < min(lo+cfg.batch, cfg.entries); i++ {
			keys = append(keys, key(cfg, i))
		}
		body, _ := json.Marshal(map[string]any{"keys": keys})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.base+"/v1/"+cfg.ns+"/batch", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("batch: %s, %v", resp.Status, err)
		}
		if want := int64(len(keys)) * cfg.size; n < want {
			return fmt.Errorf("batch returned %d bytes, want at least %d: entries missing", n, want)
		}
		*moved += n
	}
	return nil
}

// sequential fetches the same entries one GET at a time on one keep-alive
// connection, in passes (see passes): the baseline a batch request replaces.
func sequential(ctx context.Context, cfg config) (Result, error) {
	hc := client(1)
	var samples []time.Duration
	var moved int64
	n, secs, err := passes(cfg, func() error {
		// getOp's stride (7919) is prime to any entry count that is not one of its
		// multiples, so i = 0..entries-1 visits every key exactly once.
		for i := 0; i < cfg.entries; i++ {
			t0 := time.Now()
			got, err := getOp(ctx, hc, cfg, 0, int64(i))
			if err != nil {
				return err
			}
			moved += got
			samples = append(samples, time.Since(t0))
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	reqs := int64(n) * int64(cfg.entries)
	res := Result{Requests: reqs, Seconds: secs, RPS: float64(reqs) / secs, MBps: float64(moved) / secs / 1e6}
	res.P50ms, res.P90ms, res.P99ms = percentiles(samples)
	return res, nil
}
