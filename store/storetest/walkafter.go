package storetest

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/cachesvc/cachesvc/store"
)

// RunWalkAfter runs the capability suite of a store with WalkAfter: walks
// resumed from cursors in and across namespaces, including cursors that
// name no entry, visit what Walk would visit after the cursor, in Walk's
// order.
func RunWalkAfter(t *testing.T, open OpenFunc) {
	s, _ := openT(t, open, Limits{})
	w, ok := s.(store.AfterWalker)
	if !ok {
		t.Fatalf("%T has no WalkAfter", s)
	}
	ctx := context.Background()
	var keys []store.Key
	for i := byte(0); i < 4; i++ {
		keys = append(keys, store.Key{i * 16})
	}
	for _, ns := range []string{"a", "a.b", "b"} {
		for _, k := range keys {
			if _, err := s.Put(ctx, ns, k, bytes.NewReader([]byte(ns)), store.PutOptions{Size: -1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	name := func(m store.Meta) string { return m.Namespace + "/" + string(rune('0'+m.Key[0]/16)) }
	var all []string
	if err := s.Walk(ctx, "", func(m store.Meta) bool { all = append(all, name(m)); return true }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a/0", "a/1", "a/2", "a/3", "a.b/0", "a.b/1", "a.b/2", "a.b/3", "b/0", "b/1", "b/2", "b/3"}; !slices.Equal(all, want) {
		t.Fatalf("Walk visits %v, want %v", all, want)
	}
	tests := []struct {
		name, ns, afterNS string
		after             store.Key
		want              []string
	}{
		{"in ns from an entry", "a", "a", keys[1], []string{"a/2", "a/3"}},
		{"in ns from no entry", "a", "a", store.Key{17}, []string{"a/2", "a/3"}},
		{"in ns from the last", "a", "a", keys[3], nil},
		{"cursor before ns", "b", "a", keys[2], []string{"b/0", "b/1", "b/2", "b/3"}},
		{"cursor after ns", "a", "b", keys[0], nil},
		{"all namespaces", "", "a", keys[3], []string{"a.b/0", "a.b/1", "a.b/2", "a.b/3", "b/0", "b/1", "b/2", "b/3"}},
		{"all from the middle", "", "a.b", keys[2], []string{"a.b/3", "b/0", "b/1", "b/2", "b/3"}},
		{"all from a namespace with no entries", "", "aa", keys[0], []string{"b/0", "b/1", "b/2", "b/3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			err := w.WalkAfter(ctx, tc.ns, tc.afterNS, tc.after, func(m store.Meta) bool {
				got = append(got, name(m))
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("stops when fn says so", func(t *testing.T) {
		var got []string
		err := w.WalkAfter(ctx, "", "a", keys[2], func(m store.Meta) bool {
			got = append(got, name(m))
			return len(got) < 3
		})
		if err != nil || !slices.Equal(got, []string{"a/3", "a.b/0", "a.b/1"}) {
			t.Errorf("got %v, %v; want the first three after a/2", got, err)
		}
	})
	t.Run("invalid cursor namespace", func(t *testing.T) {
		if err := w.WalkAfter(ctx, "", "no/slash", keys[0], func(store.Meta) bool { return true }); err == nil {
			t.Error("a cursor with an invalid namespace was accepted")
		}
	})
}
