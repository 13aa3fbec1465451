package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBurstStaysUnderDiskBound writes 300 entries of 1 MiB, from 4
// writers, into a store limited to 64 MB: nearly five times the limit,
// evicted as fast as it is written. The directory is sampled after every
// Put and every 10 ms in between. The bound: the apparent size of the
// store's files less Badger's fixed files (*.mem, DISCARD, KEYREGISTRY,
// MANIFEST, LOCK; see fixedDiskFile) never exceeds 1.25×MaxBytes. A Put the
// bound refuses (ErrReclaiming) is retried; every entry must be stored in
// the end, and the last ones readable. Nothing here depends on timing: the
// bound holds because Puts are admitted against it, however slow GC is.
func TestBurstStaysUnderDiskBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 300 MiB")
	}
	const (
		limit   = 64_000_000
		entries = 300
		writers = 4
	)
	dir := t.TempDir()
	s := openInternal(t, Config{Dir: dir, MaxBytes: limit})
	defer s.Close()
	if s.cfg.MaxDiskBytes != limit*5/4 {
		t.Fatalf("MaxDiskBytes = %d, want 1.25×%d", s.cfg.MaxDiskBytes, limit)
	}
	var maxSeen, maxFixed atomic.Int64
	sample := func() {
		sc, err := scanDir(dir)
		if err != nil {
			t.Error(err)
			return
		}
		for v := maxSeen.Load(); sc.bounded > v && !maxSeen.CompareAndSwap(v, sc.bounded); v = maxSeen.Load() {
		}
		for v := maxFixed.Load(); sc.fixed > v && !maxFixed.CompareAndSwap(v, sc.fixed); v = maxFixed.Load() {
		}
	}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				sample()
			}
		}
	}()

	bodies := make([][]byte, entries)
	for i := range bodies {
		bodies[i] = make([]byte, 1<<20)
		rand.Read(bodies[i])
	}
	var next, refused atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= entries {
					return
				}
				deadline := time.Now().Add(2 * time.Minute)
				for {
					_, err := s.Put(context.Background(), "default", keyOf(fmt.Sprint(i)), bytes.NewReader(bodies[i]), PutOptions{Size: 1 << 20})
					sample()
					if err == nil {
						break
					}
					if !errors.Is(err, ErrReclaiming) || !errors.Is(err, ErrFull) || time.Now().After(deadline) {
						t.Errorf("Put %d: %v", i, err)
						return
					}
					refused.Add(1)
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	sample()
	u := s.Usage()
	t.Logf("%d × 1 MiB under %d bytes in %v: %d refusals retried; directory at most %d bytes (%.2f× the limit) besides Badger's fixed files (at most %d bytes); now %d on disk, %d accounted, %d evictions",
		entries, limit, time.Since(start).Round(time.Millisecond), refused.Load(), maxSeen.Load(), float64(maxSeen.Load())/limit, maxFixed.Load(), u.DiskBytes, u.Bytes, u.Evictions)
	if got := maxSeen.Load(); got > limit*5/4 {
		t.Errorf("directory reached %d bytes besides Badger's fixed files: %.2f× the %d byte limit, over 1.25×", got, float64(got)/limit, limit)
	}
	if u.Bytes > limit || u.Evictions < entries-limit/(1<<20) || u.DiskBytes <= 0 {
		t.Errorf("Usage = %+v", u)
	}
	for i := entries - 8; i < entries; i++ {
		got, err := readAll(s, "default", keyOf(fmt.Sprint(i)), 0)
		if err != nil || !bytes.Equal(got, bodies[i]) {
			t.Fatalf("entry %d: %d bytes, %v", i, len(got), err)
		}
	}
}

// TestDiskBoundRefusesWithoutEvicting fills a store's disk bound with
// garbage no GC may reclaim (a reader holds the snapshot that sees it), and
// checks that a Put then fails with ErrReclaiming, wrapping ErrFull, within
// DiskWait, evicts nothing, and succeeds once the reader is closed.
func TestDiskBoundRefusesWithoutEvicting(t *testing.T) {
	const limit = 8 << 20
	s := openInternal(t, Config{Dir: t.TempDir(), MaxBytes: limit, DiskWait: 200 * time.Millisecond})
	defer s.Close()
	var err error
	i := 0
	var rc interface{ Close() error }
	for ; i < 200; i++ {
		_, err = s.Put(context.Background(), "default", keyOf(fmt.Sprint(i)), bytes.NewReader(pattern(byte(i), 1<<20)), PutOptions{Size: 1 << 20})
		if err != nil {
			break
		}
		if i == 0 {
			// An open reader pins every value-log file GC rewrites.
			if _, rc, err = s.Get(context.Background(), "default", keyOf("0"), 0, -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !errors.Is(err, ErrReclaiming) || !errors.Is(err, ErrFull) {
		t.Fatalf("Put %d with a reader pinning the log: %v, want ErrReclaiming", i, err)
	}
	before := s.Usage()
	_, err = s.Put(context.Background(), "default", keyOf("again"), bytes.NewReader(pattern(1, 1<<20)), PutOptions{Size: 1 << 20})
	if !errors.Is(err, ErrReclaiming) {
		t.Fatalf("second Put: %v, want ErrReclaiming", err)
	}
	if after := s.Usage(); after.Evictions != before.Evictions || after.Entries != before.Entries {
		t.Fatalf("a refused Put evicted: %+v, then %+v", before, after)
	}
	t.Logf("refused after %d entries: %v", i, err)
	rc.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		_, err = s.Put(context.Background(), "default", keyOf("again"), bytes.NewReader(pattern(1, 1<<20)), PutOptions{Size: 1 << 20})
		if err == nil {
			break
		}
		if !errors.Is(err, ErrReclaiming) || time.Now().After(deadline) {
			t.Fatalf("Put after the reader closed: %v", err)
		}
	}
}
