package registry

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3/s3test"
)

func key(i int) store.Key { return sha256.Sum256([]byte(fmt.Sprint(i))) }

// readAccess returns the entries of every access object under prefix, as
// "ns/key" strings, per object.
func readAccess(t *testing.T, b *Bucket, prefix string) [][]string {
	t.Helper()
	var out [][]string
	for _, name := range objectNames(t, b, prefix) {
		obj, err := b.Client.GetObject(context.Background(), b.Name, name, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		err = DecodeAccess(obj, func(ns string, k store.Key) { got = append(got, ns+"/"+k.String()) })
		obj.Close()
		if err != nil {
			t.Fatalf("decode %s: %v", name, err)
		}
		out = append(out, got)
	}
	return out
}

func TestAccessLog(t *testing.T) {
	srv := s3test.Start(t)
	tests := []struct {
		name    string
		maxKeys int
		touch   []int // key numbers, in namespace "default"
		flushes int   // explicit Flush calls after the touches
		objects []int // distinct keys per object written
		dropped int64
	}{
		{"nothing touched writes nothing", 10, nil, 1, nil, 0},
		{"repeats are one entry", 10, []int{1, 1, 2, 1}, 1, []int{2}, 0},
		{"two flushes two objects", 10, []int{1, 2, 3}, 2, []int{3}, 0},
		{"full set drops the excess", 2, []int{1, 2, 3, 4, 1}, 1, []int{2}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := testBucket(t, srv)
			a, err := NewAccessLog(AccessConfig{Bucket: b, ID: "r1", MaxKeys: tt.maxKeys, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.touch {
				a.Touch("default", key(k))
			}
			for range tt.flushes {
				if err := a.Flush(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			got := readAccess(t, b, b.AccessPrefix("r1"))
			if len(got) != len(tt.objects) {
				t.Fatalf("%d objects %v, want %d", len(got), got, len(tt.objects))
			}
			for i, n := range tt.objects {
				if len(got[i]) != n || !sort.StringsAreSorted(got[i]) {
					t.Errorf("object %d: %v, want %d sorted entries", i, got[i], n)
				}
			}
			if a.Dropped() != tt.dropped {
				t.Errorf("dropped %d, want %d", a.Dropped(), tt.dropped)
			}
		})
	}
}

// TestAccessLogFlushesEarlyWhenFull hammers Touch from many goroutines with
// a small bound: the flusher writes early, and every key reaches the bucket
// (none dropped while the bucket keeps up) by Close.
func TestAccessLogFlushesEarlyWhenFull(t *testing.T) {
	srv := s3test.Start(t)
	b := testBucket(t, srv)
	a, err := NewAccessLog(AccessConfig{Bucket: b, ID: "r1", MaxKeys: 50, Interval: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				a.Touch("team-a", key(g*1000+i))
				if i%10 == 0 {
					time.Sleep(5 * time.Millisecond) // let the flusher take the set
				}
			}
		}()
	}
	wg.Wait()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	objs := readAccess(t, b, b.AccessPrefix("r1"))
	seen := map[string]bool{}
	for _, o := range objs {
		for _, e := range o {
			seen[e] = true
		}
	}
	if len(objs) < 2 {
		t.Errorf("%d objects, want early flushes", len(objs))
	}
	if int64(len(seen))+a.Dropped() != 320 {
		t.Errorf("%d keys written + %d dropped, want 320", len(seen), a.Dropped())
	}
}

// TestAccessLogSurvivesOutage: a flush that fails keeps its keys for the
// next one.
func TestAccessLogSurvivesOutage(t *testing.T) {
	srv := s3test.Start(t)
	b := testBucket(t, srv)
	a, err := NewAccessLog(AccessConfig{Bucket: b, ID: "r1", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	a.Touch("default", key(1))
	srv.Stop()
	if err := a.Flush(context.Background()); err == nil {
		t.Fatal("flush with the server down succeeded")
	}
	a.Touch("default", key(2))
	if a.Pending() != 2 {
		t.Fatalf("pending %d after a failed flush, want 2", a.Pending())
	}
	srv.Restart(t)
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := readAccess(t, b, b.AccessPrefix(""))
	if len(got) != 1 || len(got[0]) != 2 {
		t.Errorf("objects %v, want one with both keys", got)
	}
}

func TestDecodeAccess(t *testing.T) {
	k := key(1).String()
	tests := []struct {
		name string
		in   string
		want int
		err  bool
	}{
		{"ok", `{"v":1,"replica":"r","time":"2026-01-01T00:00:00Z","entries":["default/` + k + `","team-a/` + k + `"]}`, 2, false},
		{"unknown fields", `{"x":{"y":[1,2]},"entries":["default/` + k + `"],"z":3}`, 1, false},
		{"bad entries skipped", `{"entries":["default","Bad/` + k + `","default/zz","default/` + k + `"]}`, 1, false},
		{"no entries", `{}`, 0, false},
		{"not an object", `[]`, 0, true},
		{"truncated", `{"entries":["default/` + k + `"`, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			err := DecodeAccess(strings.NewReader(tt.in), func(string, store.Key) { n++ })
			if (err != nil) != tt.err || n != tt.want {
				t.Errorf("DecodeAccess = %d entries, %v; want %d, error %v", n, err, tt.want, tt.err)
			}
		})
	}
}
