package store

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

func TestStorableComponents(t *testing.T) {
	long := strings.Repeat("x", MaxLabelLen+1)
	many := map[string]string{}
	for i := 0; i <= MaxComponents; i++ {
		many[fmt.Sprint("c", i)] = "v"
	}
	cases := []struct {
		name string
		in   map[string]string
		want map[string]string
	}{
		{"nil", nil, nil},
		{"kept", map[string]string{"graph": "ab", "device": "cpu"}, map[string]string{"graph": "ab", "device": "cpu"}},
		{"long value dropped", map[string]string{"graph": long, "device": "cpu"}, map[string]string{"device": "cpu"}},
		{"long name dropped", map[string]string{long: "v", "device": "cpu"}, map[string]string{"device": "cpu"}},
		{"too many", many, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := StorableComponents(tc.in)
			if !maps.Equal(got, tc.want) || (tc.want == nil) != (got == nil) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
