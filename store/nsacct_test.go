package store

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNamespaceAccounting drives the accounting alone: per-namespace bytes
// and entries, which entry a claim evicts first, and which claims can never
// fit.
func TestNamespaceAccounting(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type entry struct {
		ns, name string
		blob     byte
		size     int64
		t        int // seconds after t0: last access
	}
	quotas := Quotas{Namespaces: map[string]Quota{
		"a":    {MaxBytes: 300},
		"few":  {MaxEntries: 2},
		"tiny": {MaxBytes: 50},
	}}
	base := []entry{
		{"a", "a1", 1, 100, 1}, {"a", "a2", 2, 100, 5}, {"a", "a3", 3, 100, 6},
		{"b", "b1", 4, 100, 0}, {"b", "b2", 1, 100, 7}, // b2 shares a1's blob
		{"few", "f1", 5, 10, 2}, {"few", "f2", 6, 10, 3},
	}
	tests := []struct {
		name       string
		max        int64 // Config.MaxBytes
		reserved   []claim
		c          claim
		wantFit    bool
		wantVictim string // namespace/name of the entry to evict first
		wantReason evictReason
		wantErr    string // "full", "max_bytes", "max_entries"
	}{
		{name: "room in an unbounded namespace", c: claim{ns: "b", bytes: 1000, nsBytes: 1000, entry: true}, wantFit: true},
		{name: "namespace at its bytes quota evicts its own oldest, not the store's",
			c: claim{ns: "a", bytes: 10, nsBytes: 10, entry: true}, wantVictim: "a/a1", wantReason: evictQuota},
		{name: "namespace at its entries quota evicts its own oldest",
			c: claim{ns: "few", entry: true}, wantVictim: "few/f1", wantReason: evictQuota},
		{name: "a chunk of a namespace's upload needs no entry slot",
			c: claim{ns: "few", bytes: 5, nsBytes: 5}, wantFit: true},
		{name: "the store's limit evicts the store's oldest (another namespace)",
			max: 430, c: claim{ns: "a", bytes: 20}, wantVictim: "b/b1", wantReason: evictSize},
		{name: "the namespace quota decides before the store's limit",
			max: 430, c: claim{ns: "a", bytes: 20, nsBytes: 20, entry: true}, wantVictim: "a/a1", wantReason: evictQuota},
		{name: "an entry bigger than the namespace's quota never fits",
			c: claim{ns: "tiny", bytes: 51, nsBytes: 51, entry: true}, wantErr: "max_bytes"},
		{name: "an upload's own earlier chunks count against the quota",
			reserved: []claim{{ns: "tiny", nsBytes: 40}},
			c:        claim{ns: "tiny", bytes: 20, nsBytes: 20, held: 40}, wantErr: "max_bytes"},
		{name: "uploads in flight into a namespace hold its room",
			reserved: []claim{{ns: "tiny", nsBytes: 40, entry: true}},
			c:        claim{ns: "tiny", bytes: 20, nsBytes: 20, entry: true}, wantErr: "max_bytes"},
		{name: "uploads in flight hold the namespace's entry slots",
			reserved: []claim{{ns: "few", entry: true}, {ns: "few", entry: true}},
			c:        claim{ns: "few", entry: true}, wantErr: "max_entries"},
		{name: "bigger than the store", max: 1000, c: claim{ns: "b", bytes: 1001, nsBytes: 1001}, wantErr: "full"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAccounting(tc.max)
			a.setQuotas(quotas)
			names := map[entryRef]string{}
			for _, e := range base {
				ref := entryRef{e.ns, keyOf(e.name)}
				a.add(ref, [32]byte{e.blob}, e.size, t0.Add(time.Duration(e.t)*time.Second))
				names[ref] = e.ns + "/" + e.name
			}
			for _, r := range tc.reserved {
				a.reserveClaim(r)
			}
			err := a.impossibleClaim(tc.c)
			var qe *QuotaError
			switch {
			case tc.wantErr == "full":
				if !errors.Is(err, ErrFull) {
					t.Fatalf("impossible = %v, want ErrFull", err)
				}
				return
			case tc.wantErr != "":
				if !errors.As(err, &qe) || !errors.Is(err, ErrQuota) || qe.Limit != tc.wantErr || qe.Namespace != tc.c.ns {
					t.Fatalf("impossible = %v, want a quota error on %s of %s", err, tc.wantErr, tc.c.ns)
				}
				return
			case err != nil:
				t.Fatalf("impossible = %v, want nil", err)
			}
			fit, victim, reason, ok := a.fitsClaim(tc.c)
			if fit != tc.wantFit {
				t.Fatalf("fit = %v, want %v", fit, tc.wantFit)
			}
			if !tc.wantFit && (!ok || names[victim] != tc.wantVictim || reason != tc.wantReason) {
				t.Fatalf("victim = %s (%s, ok %v), want %s (%s)", names[victim], reason, ok, tc.wantVictim, tc.wantReason)
			}
		})
	}
}

// TestNamespaceUsage checks the sums: a blob shared by two namespaces
// counts in each namespace but once in the store, and removals and
// evictions show per namespace and reason.
func TestNamespaceUsage(t *testing.T) {
	now := time.Now()
	a := newAccounting(0)
	a.setQuotas(Quotas{Namespaces: map[string]Quota{"quiet": {MaxBytes: 1 << 20, MaxIdle: time.Hour}}})
	a.add(entryRef{"x", keyOf("1")}, [32]byte{1}, 100, now)
	a.add(entryRef{"y", keyOf("1")}, [32]byte{1}, 100, now)
	a.add(entryRef{"y", keyOf("2")}, [32]byte{2}, 30, now)
	a.remove(entryRef{"y", keyOf("2")})
	a.countEviction("y", evictSize)
	a.countEviction("y", evictIdle)
	a.countEviction("y", evictIdle)
	u := a.usage()
	if u.Bytes != 100 || u.Entries != 2 || u.Evictions != 3 {
		t.Fatalf("store usage %+v, want 100 bytes, 2 entries, 3 evictions", u)
	}
	want := map[string]NamespaceUsage{
		"quiet": {Namespace: "quiet", MaxBytes: 1 << 20, MaxIdleSeconds: 3600},
		"x":     {Namespace: "x", Entries: 1, Bytes: 100},
		"y": {Namespace: "y", Entries: 1, Bytes: 100, Evictions: 1, Expirations: 2,
			EvictionsByReason: map[string]int64{ReasonSize: 1, ReasonIdle: 2}},
	}
	if len(u.Namespaces) != len(want) {
		t.Fatalf("namespaces %+v, want %d", u.Namespaces, len(want))
	}
	for i, got := range u.Namespaces {
		w := want[got.Namespace]
		if i > 0 && u.Namespaces[i-1].Namespace >= got.Namespace {
			t.Fatalf("namespaces not sorted: %+v", u.Namespaces)
		}
		if got.Entries != w.Entries || got.Bytes != w.Bytes || got.MaxBytes != w.MaxBytes || got.MaxIdleSeconds != w.MaxIdleSeconds ||
			got.Evictions != w.Evictions || got.Expirations != w.Expirations || len(got.EvictionsByReason) != len(w.EvictionsByReason) {
			t.Fatalf("namespace %s: %+v, want %+v", got.Namespace, got, w)
		}
		for r, n := range w.EvictionsByReason {
			if got.EvictionsByReason[r] != n {
				t.Fatalf("namespace %s evictions by reason %v, want %v", got.Namespace, got.EvictionsByReason, w.EvictionsByReason)
			}
		}
	}
	if got := a.nsUsageOf("never"); got.Namespace != "never" || got.Entries != 0 || got.MaxBytes != 0 {
		t.Fatalf("usage of an unknown namespace: %+v", got)
	}
}

// TestDefaultNamespaceQuotaShows: a namespaces file's default block bounds
// the namespace "default" too, which always exists, so its quota shows in
// the usage (the dashboard's Namespace quotas card, store.namespaces) before
// it holds anything, as a listed namespace's does. It did not appear until
// its first upload.
func TestDefaultNamespaceQuotaShows(t *testing.T) {
	tests := []struct {
		name   string
		quotas Quotas
		want   bool // "default" listed
	}{
		{"default block", Quotas{Default: Quota{MaxBytes: 5e9}}, true},
		{"listed and default block", Quotas{Default: Quota{MaxIdle: time.Hour}, Namespaces: map[string]Quota{"ci": {MaxEntries: 1}}}, true},
		{"no default block", Quotas{Namespaces: map[string]Quota{"ci": {MaxEntries: 1}}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAccounting(0)
			a.setQuotas(tc.quotas)
			var got *NamespaceUsage
			for _, u := range a.usage().Namespaces {
				if u.Namespace == DefaultNamespace {
					got = &u
				}
			}
			if (got != nil) != tc.want {
				t.Fatalf("usage lists %q: %v, want %v (%+v)", DefaultNamespace, got != nil, tc.want, a.usage().Namespaces)
			}
			if got != nil && (got.MaxBytes != tc.quotas.Default.MaxBytes || got.MaxIdleSeconds != tc.quotas.Default.MaxIdle.Seconds()) {
				t.Fatalf("default namespace usage %+v, want the default block %+v", *got, tc.quotas.Default)
			}
		})
	}
}

// TestNamespaceRecordsBounded checks that emptied namespaces without a
// quota are forgotten once there are many, and listed ones never are.
func TestNamespaceRecordsBounded(t *testing.T) {
	a := newAccounting(0)
	a.setQuotas(Quotas{Namespaces: map[string]Quota{"kept": {MaxEntries: 1}}})
	for i := range 3 * maxNamespaceRecords {
		ref := entryRef{"ns" + strconv.Itoa(i), keyOf("k")}
		a.add(ref, [32]byte{byte(i)}, 1, time.Now())
		a.remove(ref)
	}
	if n := len(a.ns); n > 2*maxNamespaceRecords+1 {
		t.Fatalf("%d namespace records kept for empty namespaces, want at most %d", n, 2*maxNamespaceRecords+1)
	}
	if _, ok := a.ns["kept"]; !ok {
		t.Fatal("the record of a namespace the quotas list was forgotten")
	}
}

// TestQuotaErrorMessages checks that every refusal names the namespace,
// the limit and its value, and says what to do.
func TestQuotaErrorMessages(t *testing.T) {
	tests := []struct {
		err  QuotaError
		want []string
	}{
		{QuotaError{Namespace: "team-a", Limit: "max_bytes", Quota: 50e9, Need: 60e9},
			[]string{`namespace "team-a" is at its quota of 50 GB (max_bytes)`, "60 GB can never fit", "raise max_bytes", "SIGHUP"}},
		{QuotaError{Namespace: "team-a", Limit: "max_bytes", Quota: 512 << 20, Need: 1 << 20, InFlight: 511 << 20},
			[]string{`quota of 512 MiB (max_bytes)`, "uploads in flight into it hold 511 MiB", "retry when they finish"}},
		{QuotaError{Namespace: "b", Limit: "max_entries", Quota: 3, Need: 1, InFlight: 3},
			[]string{`namespace "b" is at its quota of 3 entries (max_entries)`, "3 uploads into it are in flight", "raise max_entries"}},
	}
	for _, tc := range tests {
		msg := tc.err.Error()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("message %q lacks %q", msg, w)
			}
		}
		if !errors.Is(&tc.err, ErrQuota) {
			t.Errorf("%v does not match ErrQuota", &tc.err)
		}
	}
}

// TestOldestAcrossNamespaces checks oldest against a brute-force search
// over every entry after each of many random adds, touches and removes
// spread over a few namespaces (the tail times it scans must follow every
// move of a namespace's tail).
func TestOldestAcrossNamespaces(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	a := newAccounting(0)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var live []entryRef
	for step := range 5000 {
		now := t0.Add(time.Duration(step) * time.Second)
		switch op := rng.IntN(3); {
		case op == 0 || len(live) == 0:
			ref := entryRef{"ns" + strconv.Itoa(rng.IntN(5)), keyOf(strconv.Itoa(step))}
			a.add(ref, [32]byte{byte(step)}, 10, now) // as the store adds: now
			live = append(live, ref)
		case op == 1:
			a.touch(live[rng.IntN(len(live))], now)
		default:
			i := rng.IntN(len(live))
			a.remove(live[i])
			live = append(live[:i], live[i+1:]...)
		}
		got, ok := a.oldest()
		var want *acctEntry
		for _, ref := range live {
			if e, _ := a.entry(ref); want == nil || e.atime.Before(want.atime) {
				want = &e
			}
		}
		if gotE, _ := a.entry(got); ok != (want != nil) || ok && !gotE.atime.Equal(want.atime) {
			t.Fatalf("step %d: oldest = %v (ok %v), want an entry accessed at %v", step, got, ok, want.atime)
		}
	}
}

// TestStoreFullMessages checks that a refusal by the store's size limit
// tells an upload too large for the whole store (never fits) from one
// that does not fit beside other uploads in flight, counting the upload's
// own earlier chunks as its own.
func TestStoreFullMessages(t *testing.T) {
	tests := []struct {
		name     string
		reserved int64 // by every upload in flight, the claimant's held bytes included
		c        claim
		never    bool
		want     string
	}{
		{"a chunked upload outgrows the store", 4 << 20, claim{bytes: 1 << 20, held: 4 << 20}, true,
			"5 MiB received so far: the entry is larger than the whole store"},
		{"a chunked upload beside another one", 4 << 20, claim{bytes: 1 << 20, held: 1 << 20}, false,
			"the entry needs 2 MiB and other uploads in flight hold 3 MiB of the store's 4 MiB (--max-size); retry when they finish"},
		{"a whole declared size beside others", 3 << 20, claim{bytes: 2 << 20}, false,
			"the entry needs 2 MiB and other uploads in flight hold 3 MiB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newAccounting(4 << 20)
			a.reserve(tc.reserved)
			err := a.impossibleClaim(tc.c)
			if err == nil {
				t.Fatal("claim accepted")
			}
			if !errors.Is(err, ErrFull) || errors.Is(err, ErrNeverFits) != tc.never {
				t.Errorf("err %v: ErrFull %v, ErrNeverFits %v (want %v)", err, errors.Is(err, ErrFull), errors.Is(err, ErrNeverFits), tc.never)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("message %q lacks %q", err, tc.want)
			}
		})
	}
}
