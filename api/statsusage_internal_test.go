package api

import (
	"slices"
	"testing"

	"github.com/cachesvc/cachesvc/wire"
)

func TestBoundUsage(t *testing.T) {
	all := []wire.NamespaceUsage{
		{Namespace: "a", Bytes: 1, Entries: 1},
		{Namespace: "b", Bytes: 50, Entries: 2},
		{Namespace: "c", Bytes: 5, Entries: 3, MaxBytes: 100},
		{Namespace: "d", Bytes: 40, Entries: 4},
		{Namespace: "e", Bytes: 2, Entries: 5, MaxAgeSeconds: 60},
	}
	tests := []struct {
		name  string
		keep  map[string]bool
		max   int
		want  []string
		other int64 // entries summed in _other
	}{
		{"under the bound: all, as they are", nil, 5, []string{"a", "b", "c", "d", "e"}, -1},
		{"quotas first, then the largest", nil, 3, []string{"b", "c", "e", "_other"}, 1 + 4},
		{"tracked before the largest", map[string]bool{"a": true}, 3, []string{"a", "c", "e", "_other"}, 2 + 4},
		{"quotas only", nil, 2, []string{"c", "e", "_other"}, 1 + 2 + 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := boundUsage(all, tt.keep, tt.max)
			var names []string
			for _, u := range got {
				names = append(names, u.Namespace)
			}
			if !slices.Equal(names, tt.want) {
				t.Fatalf("namespaces %v, want %v", names, tt.want)
			}
			if tt.other >= 0 && got[len(got)-1].Entries != tt.other {
				t.Errorf("_other has %d entries, want %d", got[len(got)-1].Entries, tt.other)
			}
			if all[0].Namespace != "a" || all[1].Namespace != "b" {
				t.Errorf("the input was reordered")
			}
		})
	}
}
