package tiered_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/store/storetest"
	"github.com/cachesvc/cachesvc/store/tiered"
)

// TestSlowLeaderDoesNotPace: the Get that started a key's download reads
// one byte and stops; a second Get of the key reads the whole entry while
// the first still holds its reader, and the hot tier is filled, all
// without the first reading on. One download serves both.
func TestSlowLeaderDoesNotPace(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	a := newReplica(t, srv, bucket, t.TempDir(), opts{})
	b := newReplica(t, srv, bucket, t.TempDir(), opts{})
	defer a.Close()
	defer b.Close()
	data := storetest.Data(3, 8<<20+5)
	key := storetest.KeyOf("slow")
	put(t, a, key, data)
	_, slow, err := b.Get(context.Background(), "default", key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(slow, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if got, err := read(t, b, key, 0, -1); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("second reader: %d bytes, %v", len(got), err)
	}
	b.Idle()
	if _, err := b.hot.Stat(context.Background(), "default", key); err != nil {
		t.Fatalf("hot tier not filled while the first reader stalls: %v", err)
	}
	rest, err := io.ReadAll(slow)
	slow.Close()
	if err != nil || !bytes.Equal(rest, data[1:]) {
		t.Fatalf("first reader's rest: %d bytes, %v", len(rest), err)
	}
	if st := b.Stats(); st.SharedFetches != 1 || st.Collapsed != 1 {
		t.Fatalf("Stats = %+v, want one fetch serving two Gets", st)
	}
}

// TestFaultsLeakNothing runs reads and writes against a shared tier that
// stops mid-way, in both write modes, and checks that nothing panics and
// that every goroutine the stores started has ended after Close.
func TestFaultsLeakNothing(t *testing.T) {
	srv := s3test.Start(t)
	for _, mode := range []tiered.Mode{tiered.ModeThrough, tiered.ModeBehind} {
		t.Run(string(mode), func(t *testing.T) {
			http.DefaultTransport.(*http.Transport).CloseIdleConnections()
			before := runtime.NumGoroutine()
			bucket := srv.NewBucket(t)
			a := newReplica(t, srv, bucket, t.TempDir(), opts{mode: mode, probe: 20 * time.Millisecond})
			b := newReplica(t, srv, bucket, t.TempDir(), opts{probe: 20 * time.Millisecond})
			keys := make([]store.Key, 6)
			for i := range keys {
				keys[i] = storetest.KeyOf(string(mode) + string(rune('a'+i)))
				put(t, a, keys[i], storetest.Data(uint64(i), (i+1)<<20))
			}
			var wg sync.WaitGroup
			for i := range keys {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, rc, err := b.Get(context.Background(), "default", keys[i], 0, -1)
					if err == nil {
						_, _ = io.Copy(io.Discard, rc)
						rc.Close()
					}
				}()
			}
			srv.Stop() // mid-way through the reads
			wg.Wait()
			_, _, err := b.Get(context.Background(), "default", storetest.KeyOf("absent"), 0, -1)
			if !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("Get with S3 down = %v, want ErrUnavailable", err)
			}
			waitFor(t, 10*time.Second, "SharedState stayed reachable with S3 down", func() bool { return !b.SharedState().Reachable })
			if err := b.Ready(); err != nil {
				t.Fatalf("Ready with S3 down = %v, want nil (the hot tier still serves)", err)
			}
			srv.Restart(t)
			waitFor(t, 10*time.Second, "SharedState stayed unreachable with S3 back", func() bool { return b.SharedState().Reachable })
			a.Close()
			b.Close()
			if err := b.Ready(); !errors.Is(err, store.ErrClosed) {
				t.Fatalf("Ready after Close = %v, want ErrClosed (its hot tier is closed)", err)
			}
			waitFor(t, 10*time.Second, "goroutines left after Close", func() bool {
				http.DefaultTransport.(*http.Transport).CloseIdleConnections()
				return runtime.NumGoroutine() <= before
			})
		})
	}
}

// TestEvents checks that a read-through and a write report their shared
// tier operations, fill and sizes to Config.Observe.
func TestEvents(t *testing.T) {
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	var mu sync.Mutex
	var events []tiered.Event
	observe := func(e tiered.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }
	a := newReplica(t, srv, bucket, t.TempDir(), opts{})
	b := newReplica(t, srv, bucket, t.TempDir(), opts{observe: observe})
	defer a.Close()
	defer b.Close()
	data := storetest.Data(4, 2<<20)
	key := storetest.KeyOf("events")
	put(t, a, key, data)
	if _, err := read(t, b, key, 0, -1); err != nil {
		t.Fatal(err)
	}
	b.Idle()
	if _, err := read(t, b, storetest.KeyOf("absent"), 0, -1); !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	put(t, b, storetest.KeyOf("written"), data[:1000])
	mu.Lock()
	defer mu.Unlock()
	want := []struct {
		kind  tiered.EventKind
		bytes int64
		miss  bool
	}{
		{tiered.EventSharedGet, int64(len(data)), false},
		{tiered.EventFill, int64(len(data)), false},
		{tiered.EventSharedGet, 0, true},
		{tiered.EventSharedPut, 1000, false},
	}
	if len(events) != len(want) {
		t.Fatalf("events = %+v, want %d", events, len(want))
	}
	for i, w := range want {
		e := events[i]
		if e.Kind != w.kind || e.Bytes != w.bytes || errors.Is(e.Err, store.ErrNotFound) != w.miss || (!w.miss && e.Err != nil) || e.Duration <= 0 {
			t.Errorf("event %d = %+v, want %+v", i, e, w)
		}
	}
	if st := b.SharedState(); !st.Reachable || st.LastSuccess.IsZero() || st.LastError != "" {
		t.Fatalf("SharedState = %+v", st)
	}
}
