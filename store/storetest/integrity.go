package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
)

// testIntegrity stores an entry, damages its bytes with corrupt while the
// store is closed, and checks that no read ever serves it complete with
// wrong bytes: the first whole read fails with ErrCorrupt (before its last
// byte) or Get already refuses; later reads fail too, or (a store that
// heals from another copy) return exactly the original bytes.
func testIntegrity(t *testing.T, open OpenFunc, corrupt CorruptFunc) {
	dir := t.TempDir()
	s := open(t, dir, Limits{})
	data := Data(100, 3*MiB+17)
	key := KeyOf("integrity")
	put(t, s, "default", key, data)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	corrupt(t, dir, data)
	s = open(t, dir, Limits{})
	defer s.Close()
	for attempt := range 3 {
		_, rc, err := s.Get(context.Background(), "default", key, 0, -1)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) && !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("read %d: Get = %v, want ErrCorrupt or ErrNotFound", attempt, err)
			}
			continue
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		switch {
		case err == nil && attempt == 0:
			t.Fatalf("read %d of a damaged entry succeeded (%d bytes, equal to the original: %v)", attempt, len(got), bytes.Equal(got, data))
		case err == nil && !bytes.Equal(got, data):
			t.Fatalf("read %d served %d wrong bytes as complete", attempt, len(got))
		case err != nil && !errors.Is(err, store.ErrCorrupt):
			t.Fatalf("read %d: error %v, want ErrCorrupt", attempt, err)
		case err != nil && len(got) >= len(data):
			t.Fatalf("read %d delivered all %d bytes before reporting %v", attempt, len(got), err)
		}
	}
}

// streamSize is the body testStreaming moves, and streamSlack the heap growth
// it allows: a store that held the body whole would need more.
const (
	streamSize  = 96 * MiB
	streamSlack = 48 * MiB
)

// testStreaming puts and gets a body larger than the heap growth it allows,
// generated and checked on the fly, so that neither side may hold it whole.
func testStreaming(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	ctx := context.Background()
	key := KeyOf("streaming")
	h := sha256.New()
	src := io.TeeReader(io.LimitReader(rand.NewChaCha8([32]byte{1}), streamSize), h)
	var res store.PutResult
	peak := heapPeak(t, func() {
		var err error
		res, err = s.Put(ctx, "default", key, src, store.PutOptions{Size: -1})
		if err != nil {
			t.Fatalf("Put: %v", err)
		}
	})
	if res.Meta.Size != streamSize || res.Meta.SHA256 != [32]byte(h.Sum(nil)) {
		t.Fatalf("Put stored %d bytes with another digest", res.Meta.Size)
	}
	if peak > streamSlack {
		t.Fatalf("Put of %d MiB grew the heap by %d MiB, want under %d", streamSize/MiB, peak/MiB, streamSlack/MiB)
	}
	var n int64
	h.Reset()
	peak = heapPeak(t, func() {
		_, rc, err := s.Get(ctx, "default", key, 0, -1)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		defer rc.Close()
		if n, err = io.CopyBuffer(h, struct{ io.Reader }{rc}, make([]byte, 32<<10)); err != nil {
			t.Fatalf("read: %v", err)
		}
	})
	if n != streamSize || res.Meta.SHA256 != [32]byte(h.Sum(nil)) {
		t.Fatalf("Get returned %d bytes with another digest", n)
	}
	if peak > streamSlack {
		t.Fatalf("Get of %d MiB grew the heap by %d MiB, want under %d", streamSize/MiB, peak/MiB, streamSlack/MiB)
	}
}

// heapPeak runs fn and returns how far the live heap rose above where it
// started, sampled every millisecond.
func heapPeak(t *testing.T, fn func()) int64 {
	t.Helper()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	// Collect often while fn runs, so that garbage not yet swept does not
	// pass for a held body.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	base := read()
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := read() - base; v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	close(stop)
	wg.Wait()
	return peak.Load()
}
