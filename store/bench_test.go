package store_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/storetest"
)

func openBench(b testing.TB, cfg store.Config) *store.Badger {
	b.Helper()
	if cfg.Dir == "" {
		cfg.Dir = b.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	s, err := store.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

var benchSizes = []struct {
	name string
	size int
}{{"4KiB", 4 << 10}, {"16MiB", 16 << 20}, {"64MiB", 64 << 20}}

func BenchmarkPut(b *testing.B) {
	for _, bs := range benchSizes {
		b.Run(bs.name, func(b *testing.B) {
			s := openBench(b, store.Config{GCInterval: -1})
			data := storetest.Data(1, bs.size)
			b.SetBytes(int64(bs.size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				binary.LittleEndian.PutUint64(data, uint64(i)) // new bytes, no dedup
				key := storetest.KeyOf(fmt.Sprint(i))
				if _, err := s.Put(context.Background(), "default", key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkGet(b *testing.B) {
	for _, bs := range benchSizes {
		b.Run(bs.name, func(b *testing.B) {
			s := openBench(b, store.Config{GCInterval: -1})
			data := storetest.Data(2, bs.size)
			key := storetest.KeyOf("get")
			if _, err := s.Put(context.Background(), "default", key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))}); err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 256<<10)
			b.SetBytes(int64(bs.size))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				_, rc, err := s.Get(context.Background(), "default", key, 0, -1)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, rc, buf); err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
		})
	}
}

// genReader generates n bytes without holding them: each 8-byte word is its
// offset mixed with a seed.
type genReader struct {
	seed, off, n uint64
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.off >= g.n {
		return 0, io.EOF
	}
	p = p[:min(uint64(len(p)), g.n-g.off)&^7]
	if len(p) == 0 {
		return 0, io.ErrShortBuffer
	}
	for i := 0; i < len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], (g.off+uint64(i))*0x9e3779b97f4a7c15^g.seed)
	}
	g.off += uint64(len(p))
	return len(p), nil
}

// rssAnon returns this process's anonymous resident memory in bytes.
func rssAnon(t testing.TB) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no RssAnon in /proc/self/status")
	return 0
}

// peakRSS samples RssAnon until stop is closed and returns the maximum.
func peakRSS(t testing.TB, stop <-chan struct{}) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var peak int64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, rssAnon(t))
			select {
			case <-stop:
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

func bigTests(t *testing.T) {
	if os.Getenv("CACHESVC_BIG_TESTS") != "1" {
		t.Skip("set CACHESVC_BIG_TESTS=1 to run (writes 2 GiB or more)")
	}
}

// TestBigRoundTripMemory stores and reads back a generated 2 GiB entry and
// checks that anonymous resident memory grows by less than 128 MiB.
func TestBigRoundTripMemory(t *testing.T) {
	bigTests(t)
	const size = 2 << 30
	s := openBench(t, store.Config{GCInterval: -1})
	ctx := context.Background()
	key := storetest.KeyOf("big")
	base := rssAnon(t)
	stop := make(chan struct{})
	peak := peakRSS(t, stop)

	h := sha256.New()
	start, c0 := time.Now(), cpuTime()
	res, err := s.Put(ctx, "default", key, io.TeeReader(&genReader{seed: 42, n: size}, h), store.PutOptions{Size: size})
	if err != nil {
		t.Fatal(err)
	}
	putTime := time.Since(start)
	putCPU := cpuTime() - c0
	if !bytes.Equal(res.Meta.SHA256[:], h.Sum(nil)) {
		t.Fatal("stored sha256 differs from the generated stream's")
	}
	start = time.Now()
	_, rc, err := s.Get(ctx, "default", key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	h.Reset()
	n, err := io.CopyBuffer(h, rc, make([]byte, 256<<10))
	rc.Close()
	if err != nil || n != size {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	getTime := time.Since(start)
	close(stop)
	p := <-peak
	if !bytes.Equal(res.Meta.SHA256[:], h.Sum(nil)) {
		t.Fatal("bytes read back differ from the bytes written")
	}
	growth := p - base
	t.Logf("2 GiB: put %v (%.0f MiB/s, %.1f CPU-s incl. generating and hashing the input), get %v (%.0f MiB/s); RssAnon %d MiB at start, peak %d MiB, growth %d MiB",
		putTime.Round(time.Millisecond), float64(size)/(1<<20)/putTime.Seconds(), putCPU.Seconds(),
		getTime.Round(time.Millisecond), float64(size)/(1<<20)/getTime.Seconds(), base>>20, p>>20, growth>>20)
	if growth >= 128<<20 {
		t.Fatalf("RssAnon grew by %d MiB during a 2 GiB round trip; the bound is 128 MiB", growth>>20)
	}
}

// cpuTime returns the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBadgerTuning writes a generated 2 GiB entry per op with the
// store's Badger tuning and with Badger's defaults, at the default 1 MiB
// chunks (just over Badger's default 1 MiB value threshold, so chunks reach
// the value log either way) and at 256 KiB chunks (which Badger's defaults
// keep in the LSM tree). Run it alone: -run '^$' -bench BadgerTuning
// -benchtime 1x. It reports CPU seconds (wall time is noisy on shared
// machines) and RssAnon growth.
func BenchmarkBadgerTuning(b *testing.B) {
	const size = 2 << 30
	for _, tc := range []struct {
		name string
		cfg  store.Config
	}{
		{"tuned-1MiB", store.Config{}},
		{"defaults-1MiB", store.Config{BadgerDefaults: true}},
		{"tuned-256KiB", store.Config{ChunkSize: 256 << 10}},
		{"defaults-256KiB", store.Config{BadgerDefaults: true, ChunkSize: 256 << 10}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(size)
			var cpu time.Duration
			var growth int64
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				cfg := tc.cfg
				cfg.GCInterval = -1
				cfg.Dir = b.TempDir()
				s := openBench(b, cfg)
				base := rssAnon(b)
				stop := make(chan struct{})
				peak := peakRSS(b, stop)
				c0 := cpuTime()
				b.StartTimer()
				if _, err := s.Put(context.Background(), "default", storetest.KeyOf("big"), &genReader{seed: uint64(i), n: size}, store.PutOptions{Size: size}); err != nil {
					b.Fatal(err)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += cpuTime() - c0
				close(stop)
				growth = max(growth, <-peak-base)
				b.StartTimer()
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(growth>>20), "rssanon-growth-MiB")
		})
	}
}

// BenchmarkPutSyncWrites measures crash-safe Puts (Config.SyncWrites) from
// concurrent writers, which share fsyncs (groupsync.go): 4 KiB entries from
// 1 and 8 writers, 16 MiB entries from 4.
func BenchmarkPutSyncWrites(b *testing.B) {
	for _, bc := range []struct {
		name    string
		size    int
		writers int
	}{
		{"4KiB/c1", 4 << 10, 1},
		{"4KiB/c8", 4 << 10, 8},
		{"16MiB/c4", 16 << 20, 4},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := openBench(b, store.Config{GCInterval: -1, SyncWrites: true})
			var next atomic.Int64
			b.SetBytes(int64(bc.size))
			b.ReportAllocs()
			b.SetParallelism((bc.writers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				data := storetest.Data(1, bc.size)
				for pb.Next() {
					i := next.Add(1)
					binary.LittleEndian.PutUint64(data, uint64(i)) // new bytes, no dedup
					key := storetest.KeyOf(fmt.Sprint("sync", i))
					if _, err := s.Put(context.Background(), "default", key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
