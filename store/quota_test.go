package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/storetest"
)

// quotaStore opens a store with quotas and no background expiry (tests run
// passes themselves), recording evictions.
type quotaStore struct {
	*store.Badger
	mu      sync.Mutex
	evicted []string // ns/name (reason)
	names   map[store.Key]string
}

func openQuotaStore(t *testing.T, dir string, cfg store.Config) *quotaStore {
	t.Helper()
	qs := &quotaStore{names: map[store.Key]string{}}
	cfg.Dir, cfg.Logger, cfg.ExpiryInterval = dir, testLogger(t), -1
	cfg.OnEvict = func(m store.Meta, reason string) {
		qs.mu.Lock()
		qs.evicted = append(qs.evicted, m.Namespace+"/"+qs.name(m.Key)+" ("+reason+")")
		qs.mu.Unlock()
	}
	s, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	qs.Badger = s
	return qs
}

func (qs *quotaStore) name(k store.Key) string {
	if n, ok := qs.names[k]; ok {
		return n
	}
	return k.String()
}

// put stores size bytes (content seeded by seed) as ns/name, declaring the
// size when declare is set.
func (qs *quotaStore) put(t *testing.T, ns, name string, seed uint64, size int, declare bool) error {
	t.Helper()
	k := storetest.KeyOf(name)
	qs.mu.Lock()
	qs.names[k] = name
	qs.mu.Unlock()
	opts := store.PutOptions{Size: -1}
	if declare {
		opts.Size = int64(size)
	}
	_, err := qs.Put(context.Background(), ns, k, bytes.NewReader(storetest.Data(seed, size)), opts)
	time.Sleep(2 * time.Millisecond) // distinct access times
	return err
}

// present returns the names (of names) stored in ns.
func (qs *quotaStore) present(t *testing.T, ns string, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		if _, err := qs.Stat(context.Background(), ns, storetest.KeyOf(n)); err == nil {
			out = append(out, n)
		} else if !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
	}
	return out
}

func (qs *quotaStore) evictions() []string {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return slices.Clone(qs.evicted)
}

func nsUsage(u store.Usage, ns string) store.NamespaceUsage {
	for _, n := range u.Namespaces {
		if n.Namespace == ns {
			return n
		}
	}
	return store.NamespaceUsage{}
}

// TestQuotaEvictsOnlyItsNamespace fills a namespace past its quota (bytes
// or entries, with declared sizes or streamed) in a real Badger store: its
// own least recently used entries go, another namespace's stay.
func TestQuotaEvictsOnlyItsNamespace(t *testing.T) {
	const size = 10 << 10
	tests := []struct {
		name    string
		quota   store.Quota
		declare bool
	}{
		{"max_bytes, declared sizes", store.Quota{MaxBytes: 3 * size}, true},
		{"max_bytes, streamed", store.Quota{MaxBytes: 3 * size}, false},
		{"max_entries", store.Quota{MaxEntries: 3}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			qs := openQuotaStore(t, t.TempDir(), store.Config{Quotas: store.Quotas{Namespaces: map[string]store.Quota{"team-a": tc.quota}}})
			ctx := context.Background()
			// The other namespace's entries are the oldest in the store.
			for i, n := range []string{"b1", "b2"} {
				if err := qs.put(t, "team-b", n, uint64(100+i), size, tc.declare); err != nil {
					t.Fatal(err)
				}
			}
			for i, n := range []string{"a1", "a2", "a3"} {
				if err := qs.put(t, "team-a", n, uint64(i), size, tc.declare); err != nil {
					t.Fatal(err)
				}
			}
			// a1 is read: a2 becomes team-a's least recently used.
			_, r, err := qs.Get(ctx, "team-a", storetest.KeyOf("a1"), 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			for i, n := range []string{"a4", "a5"} {
				if err := qs.put(t, "team-a", n, uint64(10+i), size, tc.declare); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := qs.present(t, "team-a", "a1", "a2", "a3", "a4", "a5"), []string{"a1", "a4", "a5"}; !slices.Equal(got, want) {
				t.Fatalf("team-a holds %v, want %v", got, want)
			}
			if got := qs.present(t, "team-b", "b1", "b2"); len(got) != 2 {
				t.Fatalf("team-b holds %v, want both of its entries", got)
			}
			if got, want := qs.evictions(), []string{"team-a/a2 (quota)", "team-a/a3 (quota)"}; !slices.Equal(got, want) {
				t.Fatalf("OnEvict saw %v, want %v", got, want)
			}
			u := qs.Usage()
			a, b := nsUsage(u, "team-a"), nsUsage(u, "team-b")
			if a.Entries != 3 || a.Bytes != 3*size || a.Evictions != 2 || a.EvictionsByReason[store.ReasonQuota] != 2 ||
				a.MaxBytes != tc.quota.MaxBytes || a.MaxEntries != tc.quota.MaxEntries {
				t.Fatalf("team-a usage %+v", a)
			}
			if b.Entries != 2 || b.Evictions != 0 || u.Evictions != 2 || u.Entries != 5 {
				t.Fatalf("team-b usage %+v, store %+v", b, u)
			}
		})
	}
}

// TestQuotaRefusesWhatCanNeverFit checks the refusals: an entry bigger than
// its namespace's max_bytes (declared: before a byte is read; streamed:
// while streaming), also when its content is already stored elsewhere;
// nothing is stored and nothing evicted.
func TestQuotaRefusesWhatCanNeverFit(t *testing.T) {
	const quota = 50 << 10
	qs := openQuotaStore(t, t.TempDir(), store.Config{Quotas: store.Quotas{Default: store.Quota{MaxBytes: quota}}})
	if err := qs.put(t, "small", "keep", 1, 10<<10, true); err != nil {
		t.Fatal(err)
	}
	big := storetest.Data(9, quota+1)
	sum := sha256.Sum256(big)
	// The big content is stored in a namespace with its own larger quota.
	if err := qs.SetQuotas(store.Quotas{Default: store.Quota{MaxBytes: quota}, Namespaces: map[string]store.Quota{"roomy": {}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := qs.Put(context.Background(), "roomy", storetest.KeyOf("big"), bytes.NewReader(big), store.PutOptions{Size: -1}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts store.PutOptions
	}{
		{"declared", store.PutOptions{Size: int64(len(big))}},
		{"streamed", store.PutOptions{Size: -1}},
		{"known content", store.PutOptions{Size: int64(len(big)), SHA256: &sum}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := qs.Put(context.Background(), "small", storetest.KeyOf("big"), bytes.NewReader(big), tc.opts)
			var qe *store.QuotaError
			if !errors.Is(err, store.ErrQuota) || !errors.As(err, &qe) {
				t.Fatalf("Put = %v, want ErrQuota", err)
			}
			if qe.Namespace != "small" || qe.Limit != "max_bytes" || qe.Quota != quota || qe.Need <= quota {
				t.Fatalf("quota error %+v", qe)
			}
			if !strings.Contains(err.Error(), `namespace "small" is at its quota of 50 KiB (max_bytes)`) {
				t.Fatalf("message %q", err)
			}
		})
	}
	if got := qs.present(t, "small", "keep", "big"); !slices.Equal(got, []string{"keep"}) {
		t.Fatalf("small holds %v, want only keep", got)
	}
	if u := nsUsage(qs.Usage(), "small"); u.Entries != 1 || u.Bytes != 10<<10 || u.Evictions != 0 {
		t.Fatalf("small usage after refusals %+v", u)
	}
}

// TestExpiry runs expiry passes over a real store: max_idle expires what
// was not accessed for that long, max_age what was stored that long ago
// even if read since; namespaces without expiry keep everything.
func TestExpiry(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		quota  store.Quota
		remain []string
		reason string
	}{
		{"max_idle", store.Quota{MaxIdle: time.Hour}, []string{"read", "new"}, store.ReasonIdle},
		{"max_age", store.Quota{MaxAge: time.Hour}, []string{"new"}, store.ReasonAge},
		{"both", store.Quota{MaxIdle: 2 * time.Hour, MaxAge: time.Hour}, []string{"new"}, store.ReasonAge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			qs := openQuotaStore(t, t.TempDir(), store.Config{Quotas: store.Quotas{Namespaces: map[string]store.Quota{"exp": tc.quota}}})
			for i, n := range []string{"read", "old"} {
				if err := qs.put(t, "exp", n, uint64(i), 100, true); err != nil {
					t.Fatal(err)
				}
				if err := qs.put(t, "other", n, uint64(i), 100, true); err != nil {
					t.Fatal(err)
				}
			}
			mid := time.Now()
			time.Sleep(5 * time.Millisecond)
			if err := qs.put(t, "exp", "new", 3, 100, true); err != nil {
				t.Fatal(err)
			}
			_, r, err := qs.Get(ctx, "exp", storetest.KeyOf("read"), 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			// As of an hour after mid: "old" was idle for over an hour,
			// "read" and "old" were stored over an hour before.
			now := mid.Add(time.Hour)
			if n := qs.ExpirePass(now); n != int64(3-len(tc.remain)) {
				t.Fatalf("pass removed %d entries, want %d", n, 3-len(tc.remain))
			}
			if got := qs.present(t, "exp", "read", "old", "new"); !slices.Equal(got, tc.remain) {
				t.Fatalf("exp holds %v, want %v", got, tc.remain)
			}
			if got := qs.present(t, "other", "read", "old"); len(got) != 2 {
				t.Fatalf("other holds %v, want both", got)
			}
			u := nsUsage(qs.Usage(), "exp")
			if u.Expirations != int64(3-len(tc.remain)) || u.Evictions != 0 || u.EvictionsByReason[tc.reason] == 0 {
				t.Fatalf("exp usage %+v", u)
			}
			if got := qs.evictions(); len(got) != 3-len(tc.remain) {
				t.Fatalf("OnEvict saw %v", got)
			}
			for _, e := range qs.evictions() {
				if !strings.HasSuffix(e, " ("+tc.reason+")") {
					t.Fatalf("OnEvict saw %v, want every one for %s", qs.evictions(), tc.reason)
				}
			}
			if n := qs.ExpirePass(now); n != 0 {
				t.Fatalf("a second pass removed %d more", n)
			}
		})
	}
}

// TestExpiryWorkIsBounded checks that one pass examines about ExpiryBatch
// entries: a backlog takes several passes.
func TestExpiryWorkIsBounded(t *testing.T) {
	for _, q := range []store.Quota{{MaxIdle: time.Hour}, {MaxAge: time.Hour}} {
		qs := openQuotaStore(t, t.TempDir(), store.Config{ExpiryBatch: 4, Quotas: store.Quotas{Default: q}})
		for i := range 10 {
			if err := qs.put(t, "ns", "e"+string(rune('a'+i)), uint64(i), 10, true); err != nil {
				t.Fatal(err)
			}
		}
		now := time.Now().Add(2 * time.Hour)
		var passes []int64
		for total := int64(0); total < 10; {
			n := qs.ExpirePass(now)
			if n > 4 {
				t.Fatalf("%+v: a pass removed %d entries, over its batch of 4", q, n)
			}
			if passes = append(passes, n); len(passes) > 10 {
				t.Fatalf("%+v: passes %v never removed all 10", q, passes)
			}
			total += n
		}
		if u := nsUsage(qs.Usage(), "ns"); u.Entries != 0 || u.Expirations != 10 {
			t.Fatalf("%+v: usage %+v after passes %v", q, u, passes)
		}
	}
}

// TestSetQuotasLowersAndEvicts lowers a namespace's quota in a running
// store: Puts see it at once, and the next pass evicts the namespace down
// to it (least recently used first) and nothing of another namespace.
// Reopening with the lower quota keeps it.
func TestSetQuotasLowersAndEvicts(t *testing.T) {
	dir := t.TempDir()
	qs := openQuotaStore(t, dir, store.Config{})
	names := []string{"e0", "e1", "e2", "e3", "e4", "e5"}
	for i, n := range names {
		if err := qs.put(t, "team-a", n, uint64(i), 1000, true); err != nil {
			t.Fatal(err)
		}
		if err := qs.put(t, "team-b", n, uint64(i), 1000, true); err != nil {
			t.Fatal(err)
		}
	}
	bad := store.Quotas{Namespaces: map[string]store.Quota{"Bad Name": {MaxEntries: 1}}}
	if err := qs.SetQuotas(bad); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("SetQuotas of a bad namespace = %v, want ErrInvalid", err)
	}
	if err := qs.SetQuotas(store.Quotas{Namespaces: map[string]store.Quota{"team-a": {MaxEntries: 4, MaxBytes: 2500}}}); err != nil {
		t.Fatal(err)
	}
	if u := nsUsage(qs.Usage(), "team-a"); u.MaxEntries != 4 || u.MaxBytes != 2500 || u.Entries != 6 {
		t.Fatalf("team-a usage before the pass %+v", u)
	}
	if n := qs.ExpirePass(time.Now()); n != 4 {
		t.Fatalf("pass evicted %d, want 4 (down to 2500 bytes)", n)
	}
	if got := qs.present(t, "team-a", names...); !slices.Equal(got, []string{"e4", "e5"}) {
		t.Fatalf("team-a holds %v, want its two newest", got)
	}
	if got := qs.present(t, "team-b", names...); len(got) != 6 {
		t.Fatalf("team-b holds %v, want all 6", got)
	}
	qs.Close()

	// Reopened with a lower quota still: the first pass evicts down to it.
	qs = openQuotaStore(t, dir, store.Config{Quotas: store.Quotas{Namespaces: map[string]store.Quota{"team-a": {MaxEntries: 1}}}})
	if n := qs.ExpirePass(time.Now()); n != 1 {
		t.Fatalf("pass after reopening evicted %d, want 1", n)
	}
	if got := qs.present(t, "team-a", names...); !slices.Equal(got, []string{"e5"}) {
		t.Fatalf("team-a holds %v after reopening, want e5", got)
	}
}

// TestExpiryLoop checks that the background loop applies max_idle on its
// own.
func TestExpiryLoop(t *testing.T) {
	s, err := store.Open(store.Config{Dir: t.TempDir(), Logger: testLogger(t), ExpiryInterval: 20 * time.Millisecond,
		Quotas: store.Quotas{Namespaces: map[string]store.Quota{"brief": {MaxIdle: 200 * time.Millisecond}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, ns := range []string{"brief", "lasting"} {
		if _, err := s.Put(ctx, ns, storetest.KeyOf("k"), bytes.NewReader([]byte("x")), store.PutOptions{Size: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := s.Stat(ctx, "brief", storetest.KeyOf("k"))
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("entry idle past max_idle still there: %v", err)
		}
	}
	if _, err := s.Stat(ctx, "lasting", storetest.KeyOf("k")); err != nil {
		t.Fatalf("entry of a namespace without expiry: %v", err)
	}
	if u := nsUsage(s.Usage(), "brief"); u.Expirations != 1 || u.EvictionsByReason[store.ReasonIdle] != 1 {
		t.Fatalf("brief usage %+v", u)
	}
}

// TestQuotaHammer puts, reads and deletes from many goroutines into
// namespaces with small quotas while quotas change and expiry passes run:
// at the end every namespace is within its quota and its accounted entries
// and bytes are what a walk of the store finds.
func TestQuotaHammer(t *testing.T) {
	const size = 4 << 10
	q := func(n int64) store.Quotas {
		return store.Quotas{Namespaces: map[string]store.Quota{"a": {MaxEntries: n}, "b": {MaxBytes: n * size, MaxIdle: time.Hour}}}
	}
	qs := openQuotaStore(t, t.TempDir(), store.Config{MaxBytes: 40 * size, Quotas: q(6)})
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				ns := []string{"a", "b", "c"}[(g+i)%3]
				k := storetest.KeyOf(string(rune('a'+g)) + string(rune('a'+i%20)))
				data := storetest.Data(uint64(g*100+i%20), size)
				opts := store.PutOptions{Size: int64(len(data))}
				if i%2 == 0 {
					opts.Size = -1
				}
				if _, err := qs.Put(ctx, ns, k, bytes.NewReader(data), opts); err != nil && !errors.Is(err, store.ErrQuota) && !errors.Is(err, store.ErrConflict) {
					t.Errorf("Put %s: %v", ns, err)
				}
				if _, r, err := qs.Get(ctx, ns, k, 0, -1); err == nil {
					r.Close()
				}
				if i%7 == 0 {
					_ = qs.Delete(ctx, ns, k)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 20 {
			if err := qs.SetQuotas(q(int64(3 + i%5))); err != nil {
				t.Error(err)
			}
			qs.ExpirePass(time.Now())
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	qs.ExpirePass(time.Now()) // down to the last quotas set
	final := q(3 + 19%5)
	u := qs.Usage()
	if u.Bytes > 40*size {
		t.Fatalf("store holds %d bytes over its %d", u.Bytes, 40*size)
	}
	for _, ns := range []string{"a", "b", "c"} {
		var entries, bytes int64
		if err := qs.Walk(ctx, ns, func(m store.Meta) bool { entries++; bytes += m.Size; return true }); err != nil {
			t.Fatal(err)
		}
		nu := nsUsage(u, ns)
		if nu.Entries != entries || nu.Bytes != bytes {
			t.Fatalf("%s accounted %d entries, %d bytes; the store holds %d, %d", ns, nu.Entries, nu.Bytes, entries, bytes)
		}
		fq := final.For(ns)
		if fq.MaxEntries > 0 && entries > fq.MaxEntries || fq.MaxBytes > 0 && bytes > fq.MaxBytes {
			t.Fatalf("%s holds %d entries, %d bytes over its quota %+v", ns, entries, bytes, fq)
		}
	}
}

// TestExpiryBacklog checks when a pass asks for another at once: when it
// ran out of budget while still removing entries, not merely because many
// namespaces have expiry with nothing to expire.
func TestExpiryBacklog(t *testing.T) {
	qs := openQuotaStore(t, t.TempDir(), store.Config{ExpiryBatch: 4, Quotas: store.Quotas{Default: store.Quota{MaxIdle: time.Hour}}})
	for i := range 10 {
		if err := qs.put(t, "ns"+string(rune('a'+i)), "k", uint64(i), 10, true); err != nil {
			t.Fatal(err)
		}
	}
	if n, more := qs.ExpirePassResult(time.Now()); n != 0 || more {
		t.Fatalf("pass over 10 fresh namespaces: removed %d, more %v; want 0, false", n, more)
	}
	now := time.Now().Add(2 * time.Hour)
	if n, more := qs.ExpirePassResult(now); n != 4 || !more {
		t.Fatalf("pass over 10 idle entries: removed %d, more %v; want 4, true", n, more)
	}
	qs.ExpirePassResult(now)
	if n, more := qs.ExpirePassResult(now); n != 2 || more {
		t.Fatalf("last pass: removed %d, more %v; want 2, false", n, more)
	}
}

// BenchmarkPutEvicting measures 4 KiB Puts that each evict one entry: for
// the store's size (the oldest of every namespace's LRU tail, O(namespaces))
// and for a namespace's quota (its own tail), with 1 and 1,000 namespaces
// holding entries.
func BenchmarkPutEvicting(b *testing.B) {
	const size, held = 4 << 10, 2000
	for _, bc := range []struct {
		name  string
		nss   int
		quota bool
	}{{"size/namespaces=1", 1, false}, {"size/namespaces=1000", 1000, false}, {"quota/namespaces=1", 1, true}, {"quota/namespaces=1000", 1000, true}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := store.Config{GCInterval: -1, ExpiryInterval: -1, MaxBytes: held * size}
			if bc.quota {
				cfg.MaxBytes = 0
				cfg.Quotas = store.Quotas{Namespaces: map[string]store.Quota{"ns0": {MaxEntries: held / int64(bc.nss)}}}
			}
			s := openBench(b, cfg)
			data := storetest.Data(1, size)
			put := func(ns string, i int) {
				binary.LittleEndian.PutUint64(data, uint64(i)) // new bytes, no dedup
				if _, err := s.Put(context.Background(), ns, storetest.KeyOf(fmt.Sprint(i)), bytes.NewReader(data), store.PutOptions{Size: size}); err != nil {
					b.Fatal(err)
				}
			}
			for i := range held {
				put("ns"+strconv.Itoa(i%bc.nss), i)
			}
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				ns := "ns0"
				if !bc.quota {
					ns = "ns" + strconv.Itoa(i%bc.nss)
				}
				put(ns, held+i)
			}
			b.StopTimer()
			if s.Usage().Evictions < int64(b.N) {
				b.Fatalf("%d evictions for %d Puts", s.Usage().Evictions, b.N)
			}
		})
	}
}
