package keying

import (
	"context"
	"testing"

	"github.com/cachesvc/cachesvc/plugins"
)

// TestForgetPlugin: ForgetPlugin drops the memo's results of one plugin,
// only those, and the next Key of a forgotten signature runs the plugin.
func TestForgetPlugin(t *testing.T) {
	ctx := context.Background()
	k := newTestKeyer(t, plugins.Config{}, Config{})
	sigs := map[string]string{
		"empty":       `{"backend":"empty","z":1}`,
		"empty again": `{"backend":"empty","z":2}`,
		"passthrough": `{"backend":"passthrough","kind":"jax","key":"jit_f-0a1b"}`,
	}
	ids := map[string]string{}
	for name, sig := range sigs {
		res, err := k.Key(ctx, []byte(sig))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ids[name] = res.Plugin
	}
	if got := k.ForgetPlugin(ids["empty"]); got != 2 {
		t.Fatalf("ForgetPlugin(%s) = %d, want 2", ids["empty"], got)
	}
	if got := k.ForgetPlugin("nothing@1"); got != 0 {
		t.Fatalf("ForgetPlugin(nothing@1) = %d, want 0", got)
	}
	tests := []struct {
		name     string
		wantMemo bool
	}{
		{"empty", false},
		{"empty again", false},
		{"passthrough", true},
	}
	for _, tt := range tests {
		res, err := k.Key(ctx, []byte(sigs[tt.name]))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if res.Memo != tt.wantMemo {
			t.Errorf("%s after ForgetPlugin: Memo = %v, want %v", tt.name, res.Memo, tt.wantMemo)
		}
	}
}
