package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
)

func testRoundTrip(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	sizes := []struct {
		name string
		size int
	}{
		{"0B", 0}, {"1B", 1}, {"4KiB", 4 << 10}, {"1MiB", MiB}, {"1MiB+1", MiB + 1}, {"multi-chunk", 3*MiB + 12345},
	}
	for i, tc := range sizes {
		t.Run(tc.name, func(t *testing.T) {
			data := Data(uint64(i), tc.size)
			key := KeyOf("roundtrip-" + tc.name)
			for _, declared := range []bool{true, false} {
				ns := "default"
				if !declared {
					ns = "undeclared"
				}
				var res store.PutResult
				if declared {
					res = put(t, s, ns, key, data)
				} else {
					var err error
					res, err = s.Put(context.Background(), ns, key, iotestHalf(bytes.NewReader(data)), store.PutOptions{Size: -1})
					if err != nil {
						t.Fatalf("Put without size: %v", err)
					}
				}
				if !res.Created || res.Meta.Size != int64(tc.size) || res.Meta.SHA256 != sha256.Sum256(data) {
					t.Fatalf("Put = %+v, want created, size %d", res, tc.size)
				}
				m, got := get(t, s, ns, key, 0, -1)
				if !bytes.Equal(got, data) {
					t.Fatalf("Get returned %d bytes differing from the %d stored", len(got), len(data))
				}
				if m.Size != int64(tc.size) || m.SHA256 != sha256.Sum256(data) || m.Namespace != ns || m.Key != key {
					t.Fatalf("Get meta = %+v", m)
				}
				st, err := s.Stat(context.Background(), ns, key)
				if err != nil || st.Size != int64(tc.size) || st.SHA256 != m.SHA256 {
					t.Fatalf("Stat = %+v, %v", st, err)
				}
			}
		})
	}
}

// iotestHalf returns a reader that returns at most 1000 bytes per Read, like
// a network body.
func iotestHalf(r io.Reader) io.Reader { return &smallReader{r} }

type smallReader struct{ r io.Reader }

func (s *smallReader) Read(p []byte) (int, error) {
	if len(p) > 1000 {
		p = p[:1000]
	}
	return s.r.Read(p)
}

func testRange(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	size := 2*MiB + 777
	data := Data(7, size)
	key := KeyOf("range")
	put(t, s, "default", key, data)
	tests := []struct {
		name   string
		off, n int64
		want   []byte
	}{
		{"all", 0, -1, data},
		{"first byte", 0, 1, data[:1]},
		{"inside first chunk", 100, 1000, data[100:1100]},
		{"across chunk boundary", MiB - 10, 20, data[MiB-10 : MiB+10]},
		{"second chunk start", MiB, 5, data[MiB : MiB+5]},
		{"tail from offset", 2*MiB + 700, -1, data[2*MiB+700:]},
		{"n past end is clamped", int64(size) - 3, 100, data[size-3:]},
		{"offset at end is empty", int64(size), -1, nil},
		{"offset past end is empty", int64(size) + 10, 5, nil},
		{"zero length", 10, 0, nil},
		{"last byte", int64(size) - 1, 1, data[size-1:]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, got := get(t, s, "default", key, tc.off, tc.n)
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("Get(%d, %d) returned %d bytes, want %d", tc.off, tc.n, len(got), len(tc.want))
			}
		})
	}
}

func testMiss(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	ctx := context.Background()
	key := KeyOf("missing")
	_, _, err := s.Get(ctx, "default", key, 0, -1)
	wantErr(t, "Get miss", err, store.ErrNotFound)
	_, err = s.Stat(ctx, "default", key)
	wantErr(t, "Stat miss", err, store.ErrNotFound)
	put(t, s, "other", key, []byte("x"))
	_, err = s.Stat(ctx, "default", key)
	wantErr(t, "Stat in another namespace", err, store.ErrNotFound)
}

func testIdentical(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	data := Data(4, 10000)
	key := KeyOf("identical")
	first := put(t, s, "default", key, data)
	second := put(t, s, "default", key, data)
	if second.Created {
		t.Fatal("identical Put reported Created")
	}
	if second.Meta.SHA256 != first.Meta.SHA256 || !second.Meta.Created.Equal(first.Meta.Created) {
		t.Fatalf("identical Put returned %+v, want the first entry %+v", second.Meta, first.Meta)
	}
	wantEntries(t, s, 1)
}

func testConflict(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	key := KeyOf("conflict")
	data := Data(5, 3000)
	put(t, s, "default", key, data)
	other := Data(6, 3000)
	_, err := s.Put(context.Background(), "default", key, bytes.NewReader(other), store.PutOptions{Size: -1})
	wantErr(t, "Put of different bytes", err, store.ErrConflict)
	if _, got := get(t, s, "default", key, 0, -1); !bytes.Equal(got, data) {
		t.Fatal("conflicting Put changed the stored entry")
	}
	wantEntries(t, s, 1)
}

func testDigestMismatch(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	key := KeyOf("digest")
	data := Data(8, MiB+10)
	wrong := sha256.Sum256([]byte("something else"))
	_, err := s.Put(context.Background(), "default", key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data)), SHA256: &wrong})
	wantErr(t, "Put with wrong digest", err, store.ErrDigestMismatch)
	_, err = s.Stat(context.Background(), "default", key)
	wantErr(t, "Stat after digest mismatch", err, store.ErrNotFound)
	wantEntries(t, s, 0)
}

func testSizeMismatch(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	data := Data(9, 5000)
	for _, declared := range []int64{4999, 5001} {
		_, err := s.Put(context.Background(), "default", KeyOf("size"), bytes.NewReader(data), store.PutOptions{Size: declared})
		wantErr(t, fmt.Sprintf("Put of 5000 bytes declaring %d", declared), err, store.ErrSizeMismatch)
	}
	wantEntries(t, s, 0)
}

func testTooLarge(t *testing.T, open OpenFunc) {
	const max = MiB + 100
	s, _ := openT(t, open, Limits{MaxEntryBytes: max})
	ctx := context.Background()
	data := Data(10, max+1)
	_, err := s.Put(ctx, "default", KeyOf("big"), bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
	wantErr(t, "Put declaring too large a size", err, store.ErrTooLarge)
	_, err = s.Put(ctx, "default", KeyOf("big"), bytes.NewReader(data), store.PutOptions{Size: -1})
	wantErr(t, "Put streaming too many bytes", err, store.ErrTooLarge)
	wantEntries(t, s, 0)
	put(t, s, "default", KeyOf("exact"), data[:max])
}

func testPersistence(t *testing.T, open OpenFunc) {
	dir := t.TempDir()
	s := open(t, dir, Limits{})
	entries := map[cachekey.Key][]byte{
		KeyOf("p-a"): Data(30, 64<<10), KeyOf("p-b"): Data(31, 2*MiB+1), KeyOf("p-c"): nil,
	}
	for k, data := range entries {
		put(t, s, "default", k, data)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s = open(t, dir, Limits{})
	defer s.Close()
	for k, data := range entries {
		m, got := get(t, s, "default", k, 0, -1)
		if !bytes.Equal(got, data) || m.Size != int64(len(data)) || m.SHA256 != sha256.Sum256(data) {
			t.Fatalf("entry %s changed across reopen: %d bytes, meta %+v", k, len(got), m)
		}
	}
	wantEntries(t, s, int64(len(entries)))
}

func testConcurrentSameKey(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	data := Data(40, 2*MiB+3)
	key := KeyOf("race")
	const n = 8
	var created atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Put(context.Background(), "default", key, iotestHalf(bytes.NewReader(data)), store.PutOptions{Size: -1})
			if err != nil {
				errs <- err
				return
			}
			if res.Created {
				created.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Put: %v", err)
	}
	if created.Load() != 1 {
		t.Fatalf("%d Puts reported Created, want exactly 1", created.Load())
	}
	wantEntries(t, s, 1)
	if _, got := get(t, s, "default", key, 0, -1); !bytes.Equal(got, data) {
		t.Fatal("bytes differ after concurrent Puts")
	}
}

func testConcurrentDifferentBytes(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	key := KeyOf("race-diff")
	const n = 6
	var wg sync.WaitGroup
	var created, conflicts atomic.Int32
	winner := make(chan int, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Put(context.Background(), "default", key, bytes.NewReader(Data(uint64(50+i), 300<<10)), store.PutOptions{Size: -1})
			switch {
			case err == nil && res.Created:
				created.Add(1)
				winner <- i
			case errors.Is(err, store.ErrConflict):
				conflicts.Add(1)
			default:
				t.Errorf("Put %d: %+v, %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	if created.Load() != 1 || conflicts.Load() != n-1 {
		t.Fatalf("created %d, conflicts %d; want 1 and %d", created.Load(), conflicts.Load(), n-1)
	}
	w := <-winner
	if _, got := get(t, s, "default", key, 0, -1); !bytes.Equal(got, Data(uint64(50+w), 300<<10)) {
		t.Fatal("stored bytes are not the winner's")
	}
	wantEntries(t, s, 1)
}

// failingReader returns data, then err after limit bytes.
type failingReader struct {
	data   []byte
	limit  int
	err    error
	onFail func()
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.limit <= 0 {
		if f.onFail != nil {
			f.onFail()
		}
		return 0, f.err
	}
	n := copy(p[:min(len(p), f.limit)], f.data)
	f.data = f.data[n:]
	f.limit -= n
	return n, nil
}

func testAborted(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	data := Data(60, 3*MiB)
	errBody := errors.New("client went away")
	t.Run("reader error", func(t *testing.T) {
		_, err := s.Put(context.Background(), "default", KeyOf("abort"), &failingReader{data: data, limit: 2*MiB + 5, err: errBody}, store.PutOptions{Size: int64(len(data))})
		wantErr(t, "Put with failing body", err, errBody)
	})
	t.Run("context canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := &failingReader{data: data, limit: 2*MiB + 5, err: io.EOF, onFail: cancel}
		_, err := s.Put(ctx, "default", KeyOf("abort"), r, store.PutOptions{Size: -1})
		wantErr(t, "Put with canceled context", err, context.Canceled)
	})
	_, err := s.Stat(context.Background(), "default", KeyOf("abort"))
	wantErr(t, "Stat after aborted Puts", err, store.ErrNotFound)
	wantEntries(t, s, 0)
	// The key is usable after the aborted Puts.
	put(t, s, "default", KeyOf("abort"), data)
}

func testWalkMany(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	const n = 700
	for i := 0; i < n; i++ {
		put(t, s, "many", KeyOf(fmt.Sprint("many-", i)), []byte(fmt.Sprint(i)))
	}
	seen := map[cachekey.Key]bool{}
	var prev cachekey.Key
	err := s.Walk(context.Background(), "many", func(m store.Meta) bool {
		if len(seen) > 0 && bytes.Compare(prev[:], m.Key[:]) >= 0 {
			t.Errorf("Walk order: %s after %s", m.Key, prev)
		}
		prev = m.Key
		seen[m.Key] = true
		return true
	})
	if err != nil || len(seen) != n {
		t.Fatalf("Walk visited %d distinct entries of %d: %v", len(seen), n, err)
	}
}

func testWalk(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	ctx := context.Background()
	want := map[string][]cachekey.Key{}
	for _, ns := range []string{"alpha", "beta", "alpha.2"} {
		for i := 0; i < 4; i++ {
			k := KeyOf(fmt.Sprintf("%s-%d", ns, i))
			put(t, s, ns, k, Data(uint64(i), 10+i))
			want[ns] = append(want[ns], k)
		}
	}
	var all []store.Meta
	if err := s.Walk(ctx, "", func(m store.Meta) bool { all = append(all, m); return true }); err != nil {
		t.Fatal(err)
	}
	if len(all) != 12 {
		t.Fatalf("Walk(\"\") visited %d entries, want 12", len(all))
	}
	for i := 1; i < len(all); i++ {
		p, c := all[i-1], all[i]
		if p.Namespace > c.Namespace || p.Namespace == c.Namespace && bytes.Compare(p.Key[:], c.Key[:]) >= 0 {
			t.Fatalf("Walk order: %s/%s before %s/%s", p.Namespace, p.Key, c.Namespace, c.Key)
		}
	}
	var alpha []store.Meta
	if err := s.Walk(ctx, "alpha", func(m store.Meta) bool { alpha = append(alpha, m); return true }); err != nil {
		t.Fatal(err)
	}
	if len(alpha) != 4 {
		t.Fatalf("Walk(alpha) visited %d entries, want 4", len(alpha))
	}
	for _, m := range alpha {
		if m.Namespace != "alpha" || m.Hits != 0 {
			t.Fatalf("Walk(alpha) gave %+v", m)
		}
	}
	n := 0
	s.Walk(ctx, "", func(store.Meta) bool { n++; return n < 2 })
	if n != 2 {
		t.Fatalf("Walk continued after fn returned false: %d calls", n)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Walk(cctx, "", func(store.Meta) bool { return true }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Walk with canceled ctx = %v", err)
	}
}

func testDelete(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	ctx := context.Background()
	key := KeyOf("del")
	wantErr(t, "Delete miss", s.Delete(ctx, "default", key), store.ErrNotFound)
	data := Data(70, 2*MiB)
	put(t, s, "default", key, data)
	// A reader opened before Delete still reads the whole entry.
	_, rc, err := s.Get(ctx, "default", key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := s.Delete(ctx, "default", key); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("reader opened before Delete: %d bytes, %v", len(got), err)
	}
	_, err = s.Stat(ctx, "default", key)
	wantErr(t, "Stat after Delete", err, store.ErrNotFound)
	wantEntries(t, s, 0)
	// A deleted key can be stored again, with other bytes.
	put(t, s, "default", key, Data(71, 10))
}

func testInvalid(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	ctx := context.Background()
	key := KeyOf("invalid")
	_, err := s.Put(ctx, "Bad NS", key, bytes.NewReader(nil), store.PutOptions{})
	wantErr(t, "Put with bad namespace", err, store.ErrInvalid)
	_, _, err = s.Get(ctx, "", key, 0, -1)
	wantErr(t, "Get with empty namespace", err, store.ErrInvalid)
	_, err = s.Stat(ctx, "-x", key)
	wantErr(t, "Stat with bad namespace", err, store.ErrInvalid)
	labels := map[string]string{}
	for i := 0; i <= store.MaxLabels; i++ {
		labels[fmt.Sprint(i)] = "v"
	}
	_, err = s.Put(ctx, "default", key, bytes.NewReader(nil), store.PutOptions{Labels: labels})
	wantErr(t, "Put with too many labels", err, store.ErrInvalid)
	put(t, s, "default", key, []byte("x"))
	_, _, err = s.Get(ctx, "default", key, -1, -1)
	wantErr(t, "Get with negative offset", err, store.ErrInvalid)
}

func testClosed(t *testing.T, open OpenFunc) {
	s := open(t, t.TempDir(), Limits{})
	ctx := context.Background()
	key := KeyOf("closed")
	data := Data(80, 2*MiB)
	put(t, s, "default", key, data)
	_, rc, err := s.Get(ctx, "default", key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := io.ReadAll(rc); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("reading after Close = %v, want ErrClosed", err)
	}
	rc.Close()
	_, err = s.Put(ctx, "default", key, bytes.NewReader(data), store.PutOptions{Size: -1})
	wantErr(t, "Put after Close", err, store.ErrClosed)
	_, _, err = s.Get(ctx, "default", key, 0, -1)
	wantErr(t, "Get after Close", err, store.ErrClosed)
	_, err = s.Stat(ctx, "default", key)
	wantErr(t, "Stat after Close", err, store.ErrClosed)
	wantErr(t, "Delete after Close", s.Delete(ctx, "default", key), store.ErrClosed)
	wantErr(t, "Walk after Close", s.Walk(ctx, "", func(store.Meta) bool { return true }), store.ErrClosed)
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
