package manifest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memShared is an in-memory Shared (fleet/state runs the fleet test on S3).
type memShared struct {
	mu    sync.Mutex
	parts map[string]Part // ns/run/replica
	down  atomic.Bool
}

func (m *memShared) PutPart(_ context.Context, p Part) error {
	if m.down.Load() {
		return errors.New("down")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.parts == nil {
		m.parts = make(map[string]Part)
	}
	m.parts[p.Namespace+"/"+p.Run+"/"+p.Replica] = p
	return nil
}

func (m *memShared) Parts(_ context.Context, ns, run string, max int) ([]Part, bool, error) {
	if m.down.Load() {
		return nil, false, errors.New("down")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Part
	for _, p := range m.parts {
		if p.Namespace == ns && p.Run == run {
			if len(out) == max {
				return out, true, nil
			}
			out = append(out, p)
		}
	}
	return out, false, nil
}

func TestMerge(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	pk := func(k string, first int, looked, written bool, name string) PartKey {
		return PartKey{KeyRecord: KeyRecord{Key: k, LookedUp: looked, Written: written, Name: name}, First: at(first)}
	}
	tests := []struct {
		name      string
		parts     []Part
		max       int
		want      []KeyRecord
		truncated bool
	}{
		{"first use across replicas", []Part{
			{Replica: "a", Created: at(0), Updated: at(5), Keys: []PartKey{pk("k1", 0, true, false, ""), pk("k3", 4, true, false, "")}},
			{Replica: "b", Created: at(1), Updated: at(9), Keys: []PartKey{pk("k2", 2, false, true, "two"), pk("k1", 3, false, true, "one")}},
		}, 10, []KeyRecord{
			{Key: "k1", LookedUp: true, Written: true, Name: "one"},
			{Key: "k2", Written: true, Name: "two"},
			{Key: "k3", LookedUp: true},
		}, false},
		{"bounded", []Part{
			{Replica: "a", Keys: []PartKey{pk("k1", 0, true, false, ""), pk("k2", 1, true, false, "")}},
			{Replica: "b", Keys: []PartKey{pk("k3", 2, true, false, "")}},
		}, 2, []KeyRecord{{Key: "k1", LookedUp: true}, {Key: "k2", LookedUp: true}}, true},
		{"a truncated part", []Part{
			{Replica: "a", Truncated: true, Keys: []PartKey{pk("k1", 0, true, false, "")}},
		}, 5, []KeyRecord{{Key: "k1", LookedUp: true}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := merge(tt.parts, tt.max)
			if len(m.Keys) != len(tt.want) || m.Truncated != tt.truncated {
				t.Fatalf("keys %+v truncated %v; want %+v %v", m.Keys, m.Truncated, tt.want, tt.truncated)
			}
			for i := range tt.want {
				if m.Keys[i] != tt.want[i] {
					t.Fatalf("key %d = %+v, want %+v", i, m.Keys[i], tt.want[i])
				}
			}
		})
	}
}

func TestSharedRecorders(t *testing.T) {
	sh := &memShared{}
	newRec := func(id string) *Recorder {
		r, err := New(Config{Shared: sh, ReplicaID: id, FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	a, b, c := newRec("a"), newRec("b"), newRec("c")
	a.RecordLookup("ns", "run1", key(1))
	b.RecordWrite("ns", "run1", key(2), "two")
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(); err != nil { // Save flushes too
		t.Fatal(err)
	}
	m, err := c.Manifest(ctx, "ns", "run1")
	if err != nil || len(m.Keys) != 2 {
		t.Fatalf("merged on c: %+v %v", m, err)
	}
	if _, err := c.Manifest(ctx, "ns", "nope"); !errors.Is(err, ErrUnknownRun) {
		t.Fatalf("unknown run: %v", err)
	}
	sh.down.Store(true)
	if m, err := a.Manifest(ctx, "ns", "run1"); err != nil || len(m.Keys) != 1 {
		t.Fatalf("backend down, local run: %+v %v; want the local records", m, err)
	}
	if _, err := c.Manifest(ctx, "ns", "run1"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("backend down, no local run: %v, want ErrUnavailable", err)
	}
	a.RecordLookup("ns", "run1", key(3))
	if err := a.Flush(ctx); err == nil {
		t.Fatal("flush with the backend down succeeded")
	}
	sh.down.Store(false)
	if err := a.Close(); err != nil { // the failed run went with the last flush
		t.Fatal(err)
	}
	if m, _ := c.Manifest(ctx, "ns", "run1"); len(m.Keys) != 3 {
		t.Fatalf("after recovery: %d keys, want 3", len(m.Keys))
	}
}

func TestReplicaIDRequired(t *testing.T) {
	for _, id := range []string{"", "a/b", "-x"} {
		if _, err := New(Config{Shared: &memShared{}, ReplicaID: id}); err == nil {
			t.Fatalf("replica id %q accepted", id)
		}
	}
}
