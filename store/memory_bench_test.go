package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// benchEntries is the number of entries the memory and restart benchmarks
// hold: CACHESVC_BENCH_ENTRIES, default 100,000 (BENCHMARKS.md reports
// 1,000,000).
func benchEntries(b *testing.B) int {
	n := 100_000
	if v := os.Getenv("CACHESVC_BENCH_ENTRIES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("CACHESVC_BENCH_ENTRIES=%q: want a positive integer", v)
		}
	}
	return n
}

// benchNamespaces is how many namespaces the benchmarks spread entries over.
const benchNamespaces = 4

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// benchDigest returns a distinct, hash-like 32-byte value for i and salt.
func benchDigest(i int, salt byte) [32]byte {
	var in [9]byte
	binary.LittleEndian.PutUint64(in[:], uint64(i))
	in[8] = salt
	return sha256.Sum256(in[:])
}

// BenchmarkAccountingMemory fills the accounting with benchEntries entries
// of 2 KiB, each with its own blob, over four namespaces, as a restart
// loads them, and reports the heap it holds per entry (heap-B/entry, after
// a full GC) and the time per add.
func BenchmarkAccountingMemory(b *testing.B) {
	n := benchEntries(b)
	refs := make([]loadedEntry, n)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range refs {
		refs[i] = loadedEntry{
			ref:   entryRef{ns: "ns" + strconv.Itoa(i%benchNamespaces), key: Key(benchDigest(i, 'k'))},
			blob:  benchDigest(i, 'b'),
			size:  2048,
			atime: t0.Add(time.Duration(i) * time.Millisecond),
		}
	}
	var perEntry, perAdd float64
	for b.Loop() {
		before := heapInUse()
		start := time.Now()
		a := newAccounting(0)
		for _, e := range refs {
			a.add(e.ref, e.blob, e.size, e.atime)
		}
		perAdd = float64(time.Since(start).Nanoseconds()) / float64(n)
		after := heapInUse()
		if u := a.usage(); u.Entries != int64(n) || u.Blobs != int64(n) {
			b.Fatalf("usage = %d entries, %d blobs; want %d of each", u.Entries, u.Blobs, n)
		}
		perEntry = float64(int64(after)-int64(before)) / float64(n)
		runtime.KeepAlive(a)
	}
	b.ReportMetric(perEntry, "heap-B/entry")
	b.ReportMetric(perAdd, "ns/add")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkRestart fills a real store with benchEntries entries of 64 bytes
// (each its own blob, over four namespaces), closes it, and reports how long
// Open takes to be ready (open-s: it scans every record and loads the
// accounting) and the heap the open store holds per entry after a full GC
// (heap-B/entry: the accounting plus Badger's own tables and caches).
//
// CACHESVC_BENCH_DIR names a directory to keep the filled store in (filled
// only when it has none), so that builds can be compared on one store
// without filling it again. open-cpu-s is the process's CPU time during
// Open, steadier than open-s on a shared machine.
func BenchmarkRestart(b *testing.B) {
	n := benchEntries(b)
	dir := os.Getenv("CACHESVC_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	cfg := Config{Dir: dir, GCInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := os.Stat(dir + "/MANIFEST"); err != nil {
		fill(b, cfg, n)
	}
	var openS, openCPU, perEntry float64
	for b.Loop() {
		before := heapInUse()
		start, cpu := time.Now(), cpuTime()
		s, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		openS, openCPU = time.Since(start).Seconds(), (cpuTime() - cpu).Seconds()
		perEntry = float64(int64(heapInUse())-int64(before)) / float64(n)
		if u := s.Usage(); u.Entries != int64(n) {
			b.Fatalf("after restart: %d entries, want %d", u.Entries, n)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(openS, "open-s")
	b.ReportMetric(openCPU, "open-cpu-s")
	b.ReportMetric(perEntry, "heap-B/entry")
	b.ReportMetric(0, "ns/op")
}

// cpuTime returns the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fill stores n entries of 64 bytes with real Puts, from a few writers.
func fill(b *testing.B, cfg Config, n int) {
	b.Helper()
	s, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			body := make([]byte, 64)
			for i := w; i < n; i += writers {
				binary.LittleEndian.PutUint64(body, uint64(i))
				ns := "ns" + strconv.Itoa(i%benchNamespaces)
				if _, err := s.Put(context.Background(), ns, Key(benchDigest(i, 'k')), bytes.NewReader(body), PutOptions{Size: int64(len(body))}); err != nil {
					errs <- fmt.Errorf("fill entry %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAccountingTouch measures a hit's accounting (touch: index
// lookup, LRU move, pending hit) on a store of benchEntries entries, the
// cost a GET adds under the store's lock.
func BenchmarkAccountingTouch(b *testing.B) {
	n := benchEntries(b)
	a := newAccounting(0)
	refs := make([]entryRef, n)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range refs {
		refs[i] = entryRef{ns: "ns" + strconv.Itoa(i%benchNamespaces), key: Key(benchDigest(i, 'k'))}
		a.add(refs[i], benchDigest(i, 'b'), 2048, now)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Microsecond)
		if _, ok := a.touch(refs[(i*7919)%n], now); !ok {
			b.Fatal("touch missed")
		}
	}
}
