package registry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
	"github.com/cachesvc/cachesvc/wire"
)

// testBucket returns a Bucket on a fresh bucket of srv.
func testBucket(t *testing.T, srv *s3test.Server) *Bucket {
	t.Helper()
	b, err := Dial(s3.Config{
		Endpoint: srv.Endpoint, Bucket: srv.NewBucket(t), Prefix: "fleet", Region: s3test.Region,
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, Insecure: true, MaxRetries: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// quiet is a logger that drops everything.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// clock is a settable time for Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func TestHealthOfTheFleet(t *testing.T) {
	srv := s3test.Start(t)
	b := testBucket(t, srv)
	now := time.Now().UTC().Truncate(time.Second)
	snap := func(lookups, hits int64) *wire.Snapshot {
		return &wire.Snapshot{
			Totals:     wire.Totals{Lookups: lookups, Hits: hits},
			Namespaces: []wire.NamespaceTotals{{Namespace: "default", Totals: wire.Totals{Lookups: lookups, Hits: hits}}},
		}
	}
	replicas := []struct {
		id     string
		age    time.Duration // of the last heartbeat, at now
		close  bool          // the last heartbeat is Close's
		stats  *wire.Snapshot
		health string
	}{
		{"a", 0, false, snap(10, 5), wire.HealthOK},
		{"b", 25 * time.Second, false, snap(30, 30), wire.HealthOK},
		{"c", 31 * time.Second, false, nil, wire.HealthStale},
		{"d", 2 * time.Hour, false, snap(1, 0), wire.HealthGone},
		{"e", time.Minute, true, nil, wire.HealthStopped},
	}
	for _, rp := range replicas {
		r, err := New(Config{
			Bucket: b, ID: rp.id, Version: "v1", URL: "http://" + rp.id + ":8080", Logger: quiet,
			Now:    func() time.Time { return now.Add(-rp.age) },
			Sample: func() Sample { return Sample{Stats: rp.stats, Hot: wire.StoreUsage{Entries: 7}} },
		})
		if err != nil {
			t.Fatal(err)
		}
		if rp.close {
			err = r.Close(context.Background())
		} else {
			err = r.Publish(context.Background())
		}
		if err != nil {
			t.Fatalf("publish %s: %v", rp.id, err)
		}
	}
	reader, err := New(Config{Bucket: b, ID: "reader", Logger: quiet, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	list, err := reader.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(replicas) {
		t.Fatalf("listed %d replicas, want %d: %+v", len(list), len(replicas), list)
	}
	for i, rp := range replicas {
		t.Run(rp.id, func(t *testing.T) {
			st := list[i]
			if st.ID != rp.id || st.Health != rp.health || st.Hot.Entries != 7 || st.URL != "http://"+rp.id+":8080" {
				t.Errorf("status %+v, want id %s health %s", st, rp.id, rp.health)
			}
			// The sample is the Badger store's usage, which names no tier:
			// the heartbeat says whose it is, as a stats answer's store.hot.
			if st.Hot.Tier != wire.StoreTierHot {
				t.Errorf("heartbeat's hot tier says tier %q, want %q", st.Hot.Tier, wire.StoreTierHot)
			}
			if got := time.Duration(st.HeartbeatAge * float64(time.Second)); got != rp.age {
				t.Errorf("age %v, want %v", got, rp.age)
			}
			if (st.Stats != nil) != (rp.stats != nil) {
				t.Errorf("stats %v, want %v", st.Stats, rp.stats)
			}
		})
	}
	fleet, err := reader.Fleet(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if fleet.Healthy != 2 || len(fleet.Replicas) != 5 || fleet.Replicas[0].Stats != nil || fleet.Replicas[0].Totals.Lookups != 10 {
		t.Errorf("fleet %+v", fleet)
	}
	if tot := fleet.Totals.Totals; tot.Lookups != 41 || tot.Hits != 35 || len(fleet.Totals.Namespaces) != 1 {
		t.Errorf("fleet totals %+v", fleet.Totals)
	}
}

func TestHealth(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		st       wire.ReplicaStatus
		health   string
		ageSecs  float64
		goneWhen time.Duration
	}{
		{"fresh", wire.ReplicaStatus{Heartbeat: now, Interval: 10}, wire.HealthOK, 0, 0},
		{"clock ahead", wire.ReplicaStatus{Heartbeat: now.Add(time.Minute), Interval: 10}, wire.HealthOK, 0, 0},
		{"three intervals", wire.ReplicaStatus{Heartbeat: now.Add(-30 * time.Second), Interval: 10}, wire.HealthOK, 30, 0},
		{"past three", wire.ReplicaStatus{Heartbeat: now.Add(-31 * time.Second), Interval: 10}, wire.HealthStale, 31, 0},
		{"own interval", wire.ReplicaStatus{Heartbeat: now.Add(-100 * time.Second), Interval: 60}, wire.HealthOK, 100, 0},
		{"no interval", wire.ReplicaStatus{Heartbeat: now.Add(-31 * time.Second)}, wire.HealthStale, 31, 0},
		{"stopping", wire.ReplicaStatus{Heartbeat: now, State: wire.ReplicaStopping}, wire.HealthStopped, 0, 0},
		{"gone", wire.ReplicaStatus{Heartbeat: now.Add(-61 * time.Minute), State: wire.ReplicaStopping}, wire.HealthGone, 3660, 0},
		{"gone early", wire.ReplicaStatus{Heartbeat: now.Add(-2 * time.Minute)}, wire.HealthGone, 120, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gone := tt.goneWhen
			if gone == 0 {
				gone = DefaultGoneAfter
			}
			h, age := Health(tt.st, now, gone)
			if h != tt.health || age != tt.ageSecs {
				t.Errorf("Health = %s, %v; want %s, %v", h, age, tt.health, tt.ageSecs)
			}
		})
	}
}

// countingHandler counts log records by level.
type countingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Level.String()+" "+r.Message)
	h.mu.Unlock()
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.msgs...)
}

// TestHeartbeatOutage stops the S3 server under a running heartbeat: the
// loop keeps going, logs once when the outage starts and once when it ends,
// and the heartbeat is current again after the restart.
func TestHeartbeatOutage(t *testing.T) {
	srv := s3test.Start(t)
	b := testBucket(t, srv)
	logs := &countingHandler{}
	clk := &clock{t: time.Now()}
	r, err := New(Config{Bucket: b, ID: "a", Interval: 20 * time.Millisecond, Logger: slog.New(logs), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	waitFor(t, "first heartbeat", func() bool { _, err := readStatus(context.Background(), b, b.ReplicaObject("a")); return err == nil })
	srv.Stop()
	waitFor(t, "the outage logged", func() bool { return len(logs.lines()) >= 1 })
	time.Sleep(200 * time.Millisecond) // several failed heartbeats
	srv.Restart(t)
	waitFor(t, "the recovery logged", func() bool { return len(logs.lines()) >= 2 })
	clk.Set(clk.Now().Add(time.Hour))
	waitFor(t, "a current heartbeat", func() bool {
		st, err := readStatus(context.Background(), b, b.ReplicaObject("a"))
		return err == nil && !st.Heartbeat.Before(clk.Now().UTC())
	})
	if err := r.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
	// The outage of several failed heartbeats is one warning, then one
	// recovery. A loaded machine may see the restarted server fail one more
	// heartbeat: that is a new outage, a warning and a recovery again, never
	// a warning repeated without a recovery between.
	lines := logs.lines()
	if len(lines) < 2 {
		t.Fatalf("logs %q, want a warning and a recovery", lines)
	}
	for i, l := range lines {
		want := "WARN heartbeat failed"
		if i%2 == 1 {
			want = "INFO shared tier reachable again"
		}
		if !strings.HasPrefix(l, want) {
			t.Errorf("log line %d %q, want %q…: an outage must log one warning, then one recovery (all: %q)", i, l, want, lines)
		}
	}
	st, err := readStatus(context.Background(), b, b.ReplicaObject("a"))
	if err != nil || st.State != wire.ReplicaStopping {
		t.Errorf("last heartbeat %+v, %v; want stopping", st, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOutageLogIsRateLimited(t *testing.T) {
	logs := &countingHandler{}
	log := slog.New(logs)
	var o outage
	t0 := time.Now()
	fail := fmt.Errorf("connection refused")
	steps := []struct {
		at  time.Duration
		err error
	}{
		{0, fail}, {10 * time.Second, fail}, {9 * time.Minute, fail}, {10 * time.Minute, fail},
		{11 * time.Minute, fail}, {12 * time.Minute, nil}, {13 * time.Minute, nil}, {14 * time.Minute, fail},
	}
	for _, s := range steps {
		o.report(log, t0.Add(s.at), "heartbeat", s.err)
	}
	want := []string{"WARN heartbeat failed", "WARN heartbeat still failing", "INFO shared tier reachable again", "WARN heartbeat failed"}
	got := logs.lines()
	if len(got) != len(want) {
		t.Fatalf("logs %q, want %d lines", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("line %d %q, want %q…", i, got[i], want[i])
		}
	}
}

func TestEncodeStatusIsBounded(t *testing.T) {
	big := &wire.Snapshot{}
	for i := range 5000 {
		big.Runs = append(big.Runs, wire.RunTotals{Run: fmt.Sprintf("run-%04d-%s", i, strings.Repeat("x", 40))})
		big.TopEntries = append(big.TopEntries, wire.TopEntry{Key: strings.Repeat("a", 64), Name: strings.Repeat("n", 100)})
	}
	for i := range 64 {
		big.Namespaces = append(big.Namespaces, wire.NamespaceTotals{Namespace: fmt.Sprintf("ns-%d", i)})
	}
	// A hot tier of 20,000 namespaces (each with its usage) alone is ~2 MB.
	var manyNS wire.StoreUsage
	for i := range 20000 {
		manyNS.Namespaces = append(manyNS.Namespaces, wire.NamespaceUsage{Namespace: fmt.Sprintf("team-%05d", i), Entries: 1, Bytes: 4096})
	}
	tests := []struct {
		name     string
		maxRuns  int
		wantRuns int
		hot      wire.StoreUsage
	}{
		{"trimmed by config", 20, 20, wire.StoreUsage{}},
		{"trimmed to fit", 5000, 0, wire.StoreUsage{}}, // checked against MaxStatusBytes below
		{"hot tier of many namespaces", 20, 20, manyNS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(Config{Bucket: &Bucket{}, ID: "a", MaxRuns: tt.maxRuns, MaxTopEntries: tt.maxRuns,
				Sample: func() Sample { return Sample{Stats: big, Hot: tt.hot} }})
			if err != nil {
				t.Fatal(err)
			}
			st := r.Status(wire.ReplicaServing)
			js, err := encodeStatus(st)
			if err != nil {
				t.Fatal(err)
			}
			if len(js) > MaxStatusBytes {
				t.Errorf("heartbeat of %d bytes, over %d", len(js), MaxStatusBytes)
			}
			if tt.wantRuns > 0 && len(st.Stats.Runs) != tt.wantRuns {
				t.Errorf("%d runs, want %d", len(st.Stats.Runs), tt.wantRuns)
			}
			if !bytes.Contains(js, []byte(`"ns-0"`)) {
				t.Errorf("namespaces trimmed before runs and entries")
			}
			if len(big.Runs) != 5000 {
				t.Errorf("the sample was modified")
			}
		})
	}
}

func TestDefaultID(t *testing.T) {
	tests := []struct {
		host, dir, want string
	}{
		{"gpu-host-17", "/var/lib/cachesvc", "gpu-host-17-"},
		{"GPU_Host.example.com", "/data", "gpu_host.example.com-"},
		{"-weird host!", "/data", "weird-host--"},
		{"", "/data", "replica-"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			id := defaultID(tt.host, tt.dir)
			if !strings.HasPrefix(id, tt.want) || len(id) != len(tt.want)+8 || CheckID(id) != nil {
				t.Errorf("defaultID(%q) = %q, want %s<8 hex>", tt.host, id, tt.want)
			}
			if defaultID(tt.host, tt.dir) != id || defaultID(tt.host, tt.dir+"2") == id {
				t.Errorf("id not a function of the directory")
			}
		})
	}
	id, err := DefaultID(t.TempDir())
	if err != nil || CheckID(id) != nil {
		t.Errorf("DefaultID = %q, %v", id, err)
	}
}

func TestCheckID(t *testing.T) {
	for id, ok := range map[string]bool{"a": true, "host-1.x_y": true, "": false, "-a": false, "a/b": false, strings.Repeat("a", 129): false} {
		if (CheckID(id) == nil) != ok {
			t.Errorf("CheckID(%q) ok=%v, want %v", id, !ok, ok)
		}
	}
}

// objectNames lists every object under prefix.
func objectNames(t *testing.T, b *Bucket, prefix string) []string {
	t.Helper()
	var out []string
	for obj := range b.Client.ListObjects(context.Background(), b.Name, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		out = append(out, obj.Key)
	}
	return out
}
