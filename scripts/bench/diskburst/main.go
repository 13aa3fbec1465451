// Command diskburst measures how far a burst of uploads takes a cachesvc
// data directory past --max-size.
//
// It starts `cachesvc serve --max-size MAX --data DIR` (or uses -url and
// -data of a server already running), PUTs -n entries of -size random bytes
// from -c connections as fast as the server takes them (a 507 is retried
// after its Retry-After, so refusals slow the burst down instead of losing
// entries), and samples the data directory every -every: the sum of file
// sizes under it (what `ls -l` adds up), the blocks they occupy (what `du`
// says), and the split Badger's DB.Size reports (.vlog files, .sst files),
// with the .mem, DISCARD, KEYREGISTRY and MANIFEST files apart. It prints one
// line per sample, then the largest sample, its ratio to the limit and how
// long the burst took:
//
//	go build -o /tmp/cachesvc ./cmd/cachesvc
//	go run ./scripts/bench/diskburst -bin /tmp/cachesvc -max-size 200MB -n 1000
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// sample is one look at the data directory.
type sample struct {
	at        time.Duration
	apparent  int64 // sum of file sizes
	allocated int64 // sum of blocks × 512
	vlog, sst int64 // file sizes of the store's *.vlog and *.sst
	fixed     int64 // file sizes of the store's *.mem, DISCARD, KEYREGISTRY, MANIFEST, LOCK
	other     int64 // files in subdirectories (stats database, plugin cache, spool)
	accounted int64 // cachesvc_store_bytes
	disk      int64 // cachesvc_store_disk_bytes (-1 when not exported)
}

// fixedFile reports whether a file is one of Badger's fixed-size files:
// memtables' write-ahead logs, the discard statistics, the key registry,
// the manifest and the lock file.
func fixedFile(name string) bool {
	return strings.HasSuffix(name, ".mem") || name == "DISCARD" || name == "KEYREGISTRY" || name == "MANIFEST" || name == "LOCK"
}

func measure(dir string) (s sample, err error) {
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted while walking
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		n := info.Size()
		s.apparent += n
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			s.allocated += st.Blocks * 512
		}
		name := d.Name()
		switch {
		case filepath.Dir(path) != filepath.Clean(dir):
			s.other += n // the stats database, plugin cache, spool
		case strings.HasSuffix(name, ".vlog"):
			s.vlog += n
		case strings.HasSuffix(name, ".sst"):
			s.sst += n
		case fixedFile(name):
			s.fixed += n
		default:
			s.other += n
		}
		return nil
	})
	return s, err
}

// metrics reads two gauges from /metrics.
func metrics(hc *http.Client, base string) (accounted, disk int64) {
	accounted, disk = -1, -1
	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "cachesvc_store_bytes":
			accounted = int64(v)
		case "cachesvc_store_disk_bytes":
			disk = int64(v)
		}
	}
	return
}

func mb(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(n)/1e6)
}

func main() {
	bin := flag.String("bin", "", "cachesvc binary to start (empty: use -url)")
	base := flag.String("url", "", "base URL of a running server (with -data)")
	data := flag.String("data", "", "data directory (default: a temporary one, removed after)")
	maxSize := flag.String("max-size", "200MB", "--max-size of the server started")
	n := flag.Int("n", 1000, "entries to upload")
	size := flag.Int64("size", 1<<20, "bytes per entry")
	conc := flag.Int("c", 4, "concurrent uploads")
	every := flag.Duration("every", time.Second, "sampling interval")
	tail := flag.Duration("tail", 5*time.Second, "keep sampling this long after the burst")
	extra := flag.String("args", "", "extra serve flags, space separated")
	flag.Parse()

	limit, err := parseSize(*maxSize)
	if err != nil {
		fatal(err)
	}
	if *data == "" {
		d, err := os.MkdirTemp("", "diskburst-*")
		if err != nil {
			fatal(err)
		}
		defer os.RemoveAll(d)
		*data = filepath.Join(d, "data")
	}
	if *bin != "" {
		addr, err := freeAddr()
		if err != nil {
			fatal(err)
		}
		args := []string{"serve", "--addr", addr, "--data", *data, "--max-size", *maxSize, "--log-level", "warn", "--log-format", "text"}
		if *extra != "" {
			args = append(args, strings.Fields(*extra)...)
		}
		cmd := exec.Command(*bin, args...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			fatal(err)
		}
		defer func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}()
		*base = "http://" + addr
	} else if *base == "" || *data == "" {
		fatal(errors.New("give -bin, or -url and -data"))
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conc + 2, DisableCompression: true}}
	if err := waitReady(hc, *base); err != nil {
		fatal(err)
	}

	var samples []sample
	var smu sync.Mutex
	start := time.Now()
	take := func() {
		s, err := measure(*data)
		if err != nil {
			fmt.Fprintln(os.Stderr, "measure:", err)
			return
		}
		s.at = time.Since(start)
		s.accounted, s.disk = metrics(hc, *base)
		smu.Lock()
		samples = append(samples, s)
		smu.Unlock()
		fmt.Printf("%6.1fs  files %8s MB  du %8s MB  vlog %8s  sst %6s  fixed %6s  other %6s  accounted %8s  disk_bytes %8s\n",
			s.at.Seconds(), mb(s.apparent), mb(s.allocated), mb(s.vlog), mb(s.sst), mb(s.fixed), mb(s.other), mb(s.accounted), mb(s.disk))
	}
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(*every)
		defer t.Stop()
		take()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				take()
			}
		}
	}()

	var next, created, refused, failed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < *conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, *size)
			for {
				i := next.Add(1) - 1
				if i >= int64(*n) {
					return
				}
				if _, err := rand.Read(buf); err != nil {
					fatal(err)
				}
				for {
					code, retry, err := put(hc, *base, buf)
					if err == nil && code/100 == 2 {
						created.Add(1)
						break
					}
					if code == http.StatusInsufficientStorage {
						refused.Add(1)
						time.Sleep(retry)
						continue
					}
					failed.Add(1)
					fmt.Fprintln(os.Stderr, "put:", code, err)
					break
				}
			}
		}()
	}
	wg.Wait()
	burst := time.Since(start)
	time.Sleep(*tail)
	close(stopSampling)
	<-sampled
	take()

	// bounded is what the store's --max-size disk bound counts: the store's
	// own files (not subdirectories) less Badger's fixed files.
	bounded := func(s sample) int64 { return s.apparent - s.other - s.fixed }
	var maxAll, maxB sample
	var maxAlloc int64
	for _, s := range samples {
		if s.apparent > maxAll.apparent {
			maxAll = s
		}
		if bounded(s) > bounded(maxB) {
			maxB = s
		}
		maxAlloc = max(maxAlloc, s.allocated)
	}
	ratio := func(n int64) float64 { return float64(n) / float64(limit) }
	fmt.Printf("\nburst: %d × %d bytes under --max-size %s (%d bytes) from %d connections: %.1f s; %d stored, %d answers 507 (retried), %d failed\n",
		*n, *size, *maxSize, limit, *conc, burst.Seconds(), created.Load(), refused.Load(), failed.Load())
	fmt.Printf("max sampled every %s (%d samples):\n", *every, len(samples))
	fmt.Printf("  store files less Badger's fixed files (.vlog, .sst): %s MB = %.2f× the limit (at %.0fs)\n", mb(bounded(maxB)), ratio(bounded(maxB)), maxB.at.Seconds())
	fmt.Printf("  whole data directory, sum of file sizes: %s MB = %.2f× (at %.0fs; of it Badger's fixed files %s MB, subdirectories %s MB)\n",
		mb(maxAll.apparent), ratio(maxAll.apparent), maxAll.at.Seconds(), mb(maxAll.fixed), mb(maxAll.other))
	fmt.Printf("  whole data directory, allocated (du): %s MB = %.2f×\n", mb(maxAlloc), ratio(maxAlloc))
	last := samples[len(samples)-1]
	fmt.Printf("at the end: files %s MB (%.2f×), accounted %s MB, disk_bytes %s MB\n", mb(last.apparent), float64(last.apparent)/float64(limit), mb(last.accounted), mb(last.disk))
}

// put uploads one entry under the key of its sha256 and returns the status
// and, for a 507, how long to wait before retrying.
func put(hc *http.Client, base string, body []byte) (int, time.Duration, error) {
	sum := sha256.Sum256(body)
	key := hex.EncodeToString(sum[:])
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPut, base+"/v1/default/entries/"+key, strings.NewReader(string(body)))
	if err != nil {
		return 0, 0, err
	}
	req.ContentLength = int64(len(body))
	req.Header.Set("X-Content-SHA256", key)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	retry := 100 * time.Millisecond
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		retry = time.Duration(s) * time.Second
	}
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusInsufficientStorage {
		return resp.StatusCode, 0, fmt.Errorf("%s: %s", resp.Status, msg)
	}
	return resp.StatusCode, retry, nil
}

// waitReady waits for /readyz: /healthz answers 200 while the store opens
// and the plugins compile, when every PUT still gets 503 starting.
func waitReady(hc *http.Client, base string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := hc.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s/readyz did not answer 200 within 30s (a server started with -bin logs why above)", base)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// parseSize parses sizes like 200MB (10^6) and 64MiB (2^20).
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			v, err := strconv.ParseFloat(strings.TrimSuffix(s, u.suffix), 64)
			return int64(v * float64(u.mult)), err
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "diskburst:", err)
	os.Exit(1)
}
