package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
)

func testDedup(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	ctx := context.Background()
	data := Data(3, 2*MiB+5)
	a, b, c := KeyOf("dedup-a"), KeyOf("dedup-b"), KeyOf("dedup-c")
	put(t, s, "default", a, data)
	put(t, s, "default", b, data)
	put(t, s, "other", c, data)
	wantUsage(t, s, 3, 1, int64(len(data)))
	if err := s.Delete(ctx, "default", a); err != nil {
		t.Fatal(err)
	}
	wantUsage(t, s, 2, 1, int64(len(data)))
	if _, got := get(t, s, "default", b, 0, -1); !bytes.Equal(got, data) {
		t.Fatal("shared blob damaged by deleting one of its entries")
	}
	for _, ref := range []struct {
		ns  string
		key cachekey.Key
	}{{"default", b}, {"other", c}} {
		if err := s.Delete(ctx, ref.ns, ref.key); err != nil {
			t.Fatal(err)
		}
	}
	wantUsage(t, s, 0, 0, 0)
	// The blob can be stored again after it was freed.
	put(t, s, "default", a, data)
	if _, got := get(t, s, "default", a, 0, -1); !bytes.Equal(got, data) {
		t.Fatal("re-stored blob differs")
	}
}

func testFull(t *testing.T, open OpenFunc) {
	const max = 2 * MiB
	s, _ := openT(t, open, Limits{MaxBytes: max})
	ctx := context.Background()
	data := Data(11, max+1)
	_, err := s.Put(ctx, "default", KeyOf("full"), bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
	wantErr(t, "Put declaring more than the store holds", err, store.ErrFull)
	_, err = s.Put(ctx, "default", KeyOf("full"), bytes.NewReader(data), store.PutOptions{Size: -1})
	wantErr(t, "Put streaming more than the store holds", err, store.ErrFull)
	wantUsage(t, s, 0, 0, 0)
	put(t, s, "default", KeyOf("fits"), data[:max])
	if u := s.Usage(); u.MaxBytes != max || u.Bytes != max {
		t.Fatalf("Usage = %+v", u)
	}
}

func testEviction(t *testing.T, open OpenFunc) {
	const size = 100 << 10
	s, _ := openT(t, open, Limits{MaxBytes: 3 * size})
	ctx := context.Background()
	keys := []cachekey.Key{KeyOf("ev-a"), KeyOf("ev-b"), KeyOf("ev-c"), KeyOf("ev-d"), KeyOf("ev-e")}
	for i := 0; i < 3; i++ {
		put(t, s, "default", keys[i], Data(uint64(20+i), size))
		time.Sleep(2 * time.Millisecond) // distinct access times on coarse clocks
	}
	get(t, s, "default", keys[0], 0, -1) // a is now the most recently used; b the least
	time.Sleep(2 * time.Millisecond)
	put(t, s, "default", keys[3], Data(23, size))
	present := func(k cachekey.Key) bool {
		_, err := s.Stat(ctx, "default", k)
		return err == nil
	}
	if present(keys[1]) || !present(keys[0]) || !present(keys[2]) || !present(keys[3]) {
		t.Fatalf("after one eviction: a %v b %v c %v d %v, want b evicted", present(keys[0]), present(keys[1]), present(keys[2]), present(keys[3]))
	}
	if u := s.Usage(); u.Evictions != 1 || u.Bytes != 3*size || u.Entries != 3 {
		t.Fatalf("Usage = %+v, want 1 eviction, 3 entries", u)
	}
	// Stat and Walk do not count as access: c is still older than a.
	s.Walk(ctx, "", func(store.Meta) bool { return true })
	put(t, s, "default", keys[4], Data(24, size))
	if present(keys[2]) || !present(keys[0]) {
		t.Fatalf("second eviction: want c evicted and a kept")
	}
}

func testAccessPersistence(t *testing.T, open OpenFunc) {
	const size = 64 << 10
	dir := t.TempDir()
	lim := Limits{MaxBytes: 3 * size}
	s := open(t, dir, lim)
	a, b, c, d := KeyOf("p-a"), KeyOf("p-b"), KeyOf("p-c"), KeyOf("p-d")
	put(t, s, "default", a, Data(30, size))
	time.Sleep(2 * time.Millisecond)
	put(t, s, "default", b, Data(31, size))
	time.Sleep(2 * time.Millisecond)
	put(t, s, "default", c, Data(32, size))
	time.Sleep(2 * time.Millisecond)
	get(t, s, "default", a, 0, -1)
	get(t, s, "default", a, 0, -1)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = open(t, dir, lim)
	defer s.Close()
	m, got := get(t, s, "default", a, 0, -1)
	if !bytes.Equal(got, Data(30, size)) {
		t.Fatal("entry changed across reopen")
	}
	if m.Hits != 3 {
		t.Fatalf("hits after reopen = %d, want 3 (2 before Close, 1 now)", m.Hits)
	}
	wantUsage(t, s, 3, 3, 3*size)
	// Access order survived: b is the least recently used.
	time.Sleep(2 * time.Millisecond)
	put(t, s, "default", d, Data(33, size))
	if _, err := s.Stat(context.Background(), "default", b); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after reopen, want b evicted first; Stat(b) = %v", err)
	}
}

func testExistingKeyEvictsNothing(t *testing.T, open OpenFunc) {
	const size = 100 << 10
	lim := Limits{MaxBytes: 2 * size}
	s, dir := openT(t, open, lim)
	a, b := KeyOf("full-a"), KeyOf("full-b")
	put(t, s, "default", a, Data(90, size))
	put(t, s, "default", b, Data(91, size))
	// Both in the store that wrote the entries and in one reopened on them,
	// which knows them only from disk.
	for _, when := range []string{"", " after reopen"} {
		if when != "" {
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			s = open(t, dir, lim)
			defer s.Close()
		}
		if res := put(t, s, "default", a, Data(90, size)); res.Created {
			t.Fatal("identical Put" + when + " reported Created")
		}
		_, err := s.Put(context.Background(), "default", b, bytes.NewReader(Data(92, size)), store.PutOptions{Size: size})
		wantErr(t, "different bytes into a full store"+when, err, store.ErrConflict)
		if u := s.Usage(); u.Evictions != 0 || u.Entries != 2 {
			t.Fatalf("Usage%s = %+v: a Put of an existing key evicted entries", when, u)
		}
	}
}

func testHits(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	ctx := context.Background()
	key := KeyOf("hits")
	sum := sha256.Sum256([]byte("hello"))
	res, err := s.Put(ctx, "default", key, bytes.NewReader([]byte("hello")), store.PutOptions{
		Size: -1, SHA256: &sum, Backend: "xla", Name: "jit_f", CompileSeconds: 1.5, Writer: "host-1", Run: "run-7",
		Labels: map[string]string{"team": "ml"}, Components: map[string]string{"module": "abc"},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Meta
	if m.Backend != "xla" || m.Name != "jit_f" || m.CompileSeconds != 1.5 || m.Writer != "host-1" || m.Run != "run-7" ||
		m.Labels["team"] != "ml" || m.Components["module"] != "abc" || m.Created.IsZero() {
		t.Fatalf("Put meta = %+v", m)
	}
	for i := 1; i <= 3; i++ {
		time.Sleep(time.Millisecond)
		gm, _ := get(t, s, "default", key, 0, -1)
		if gm.Hits != int64(i) {
			t.Fatalf("Get %d: hits %d", i, gm.Hits)
		}
		if !gm.LastAccess.After(m.Created) {
			t.Fatalf("Get %d: last access %v not after creation %v", i, gm.LastAccess, m.Created)
		}
	}
	st, err := s.Stat(ctx, "default", key)
	if err != nil || st.Hits != 3 || st.Labels["team"] != "ml" || st.Backend != "xla" {
		t.Fatalf("Stat = %+v, %v", st, err)
	}
	st2, _ := s.Stat(ctx, "default", key)
	if st2.Hits != 3 {
		t.Fatal("Stat counted as an access")
	}
}

// testAbortedReleases checks that an aborted Put gives back the room it
// reserved under MaxBytes.
func testAbortedReleases(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{MaxBytes: 8 * MiB})
	data := Data(60, 3*MiB)
	errBody := errors.New("client went away")
	_, err := s.Put(context.Background(), "default", KeyOf("abort"), &failingReader{data: data, limit: 2*MiB + 5, err: errBody}, store.PutOptions{Size: int64(len(data))})
	wantErr(t, "Put with failing body", err, errBody)
	wantUsage(t, s, 0, 0, 0)
	put(t, s, "default", KeyOf("after-abort"), Data(61, 8*MiB))
}

// testAbandonedPutEvictsNothing: in a full store, an upload whose body
// fails or ends short before its first chunk is complete (a preempted job,
// a dropped connection) evicts nothing, whatever size it declared; one
// that arrives whole still evicts the least recently used entry.
func testAbandonedPutEvictsNothing(t *testing.T, open OpenFunc) {
	const size = 512 << 10
	s, _ := openT(t, open, Limits{MaxBytes: 3 * size})
	ctx := context.Background()
	for i := range 3 {
		put(t, s, "default", KeyOf(fmt.Sprintf("kept-%d", i)), Data(uint64(70+i), size))
		time.Sleep(2 * time.Millisecond) // distinct access times on coarse clocks
	}
	errBody := errors.New("client went away")
	for _, tc := range []struct {
		name string
		body io.Reader
		want error
	}{
		{"body fails", &failingReader{data: Data(80, 2*size), limit: 9 << 10, err: errBody}, errBody},
		{"body ends short", bytes.NewReader(Data(81, 9<<10)), store.ErrSizeMismatch},
	} {
		_, err := s.Put(ctx, "default", KeyOf("abandoned-"+tc.name), tc.body, store.PutOptions{Size: 2 * size})
		wantErr(t, "Put whose "+tc.name, err, tc.want)
		if u := s.Usage(); u.Evictions != 0 || u.Entries != 3 {
			t.Fatalf("Usage after a Put whose %s = %+v: want 3 entries and no eviction", tc.name, u)
		}
	}
	put(t, s, "default", KeyOf("arrives"), Data(82, size))
	if u := s.Usage(); u.Evictions != 1 || u.Entries != 3 {
		t.Fatalf("Usage after a whole Put = %+v: want the least recently used entry evicted", u)
	}
	if _, err := s.Stat(ctx, "default", KeyOf("kept-0")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Stat of the least recently used entry = %v, want it evicted", err)
	}
}

// testUsageExact checks the blob and byte counts that the core suite leaves
// out: duplicates, conflicts and failed Puts add no blob.
func testUsageExact(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	ctx := context.Background()
	data := Data(4, 10000)
	key := KeyOf("usage")
	put(t, s, "default", key, data)
	put(t, s, "default", key, data)
	wantUsage(t, s, 1, 1, int64(len(data)))
	_, err := s.Put(ctx, "default", key, bytes.NewReader(Data(5, 3000)), store.PutOptions{Size: -1})
	wantErr(t, "Put of different bytes", err, store.ErrConflict)
	wrong := sha256.Sum256([]byte("x"))
	_, err = s.Put(ctx, "default", KeyOf("usage-2"), bytes.NewReader(data[:5000]), store.PutOptions{Size: -1, SHA256: &wrong})
	wantErr(t, "Put with wrong digest", err, store.ErrDigestMismatch)
	wantUsage(t, s, 1, 1, int64(len(data)))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Put(ctx, "default", KeyOf("usage-3"), bytes.NewReader(Data(6, 2*MiB+3)), store.PutOptions{Size: -1}); err != nil {
				t.Errorf("concurrent Put: %v", err)
			}
		}()
	}
	wg.Wait()
	wantUsage(t, s, 2, 2, int64(len(data))+2*MiB+3)
}
