package state

import (
	"fmt"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/manifest"
)

// TestFleetManifest records one sweep on three replicas and reads it,
// merged, on a fourth that saw none of it.
func TestFleetManifest(t *testing.T) {
	c, srv := bucket(t)
	var recs []*manifest.Recorder
	for i := range 4 {
		r, err := manifest.New(manifest.Config{
			Shared: client(t, srv, c.Bucket()).Manifests(0), ReplicaID: fmt.Sprintf("replica-%d", i),
			FlushInterval: 100 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		recs = append(recs, r)
	}
	// Arm i of the sweep reaches replica i%3; key 0 is used by every arm,
	// so it is looked up on one replica and written on another.
	recs[0].RecordLookup("ns", "sweep-1", key(0))
	time.Sleep(time.Millisecond) // distinct first-use times, in this order
	recs[1].RecordWrite("ns", "sweep-1", key(0), "train_step")
	recs[1].RecordLookup("ns", "sweep-1", key(1))
	time.Sleep(time.Millisecond)
	recs[2].RecordWrite("ns", "sweep-1", key(2), "eval_step")
	recs[2].RecordLookup("ns", "other-run", key(9))
	if err := recs[2].Close(); err != nil { // at close
		t.Fatal(err)
	}
	// The others flush on their own within the interval.
	var m manifest.Manifest
	deadline := time.Now().Add(3 * time.Second)
	for {
		var err error
		m, err = recs[3].Manifest(ctx, "ns", "sweep-1")
		if err == nil && len(m.Keys) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("merged manifest on replica 3: %+v, %v", m, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := []manifest.KeyRecord{
		{Key: key(0).String(), Name: "train_step", LookedUp: true, Written: true},
		{Key: key(1).String(), LookedUp: true},
		{Key: key(2).String(), Name: "eval_step", Written: true},
	}
	for i := range want {
		if m.Keys[i] != want[i] {
			t.Fatalf("key %d = %+v, want %+v", i, m.Keys[i], want[i])
		}
	}
	if _, err := recs[3].Manifest(ctx, "ns", "never"); err == nil {
		t.Fatal("a run no replica saw has a manifest")
	}
	if m, err := recs[0].Manifest(ctx, "ns", "other-run"); err != nil || len(m.Keys) != 1 {
		t.Fatalf("other run: %+v %v", m, err)
	}
}
