package store_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// TestOnEvict checks that Config.OnEvict sees every eviction, with the
// evicted entry's metadata and why it went, and that it may call back into
// the store.
func TestOnEvict(t *testing.T) {
	const size = 100 << 10
	var mu sync.Mutex
	var got []store.Meta
	var reasons []string
	var s *store.Badger
	s, err := store.Open(store.Config{
		Dir: t.TempDir(), MaxBytes: 3 * size, Logger: testLogger(t),
		OnEvict: func(m store.Meta, reason string) {
			_ = s.Usage() // callbacks run outside the store's locks
			mu.Lock()
			got = append(got, m)
			reasons = append(reasons, reason)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keys := make([]store.Key, 5)
	for i := range keys {
		keys[i] = storetest.KeyOf(string(rune('a' + i)))
		data := storetest.Data(uint64(i), size)
		if _, err := s.Put(context.Background(), "default", keys[i], bytes.NewReader(data), store.PutOptions{Size: size}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // distinct access times
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || s.Usage().Evictions != 2 {
		t.Fatalf("OnEvict saw %d evictions, Usage %+v; want 2", len(got), s.Usage())
	}
	for i, m := range got {
		if m.Key != keys[i] || m.Namespace != "default" || m.Size != size || reasons[i] != store.ReasonSize {
			t.Fatalf("eviction %d: %+v (%s), want key %s of %d bytes (%s)", i, m, reasons[i], keys[i], size, store.ReasonSize)
		}
	}
}
