package keying

import (
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/cachekey"
)

func TestDecodeMemo(t *testing.T) {
	var k cachekey.Key
	k[0] = 7
	good, err := encodeMemo(Result{Key: k, Backend: "xla", Plugin: "xla@1.2.0", DisplayName: "f", Components: map[string]string{"a": "b"}, CanonicalSize: 9})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, value, plugin, backend string
		ok                           bool
	}{
		{"round trip", string(good), "xla@1.2.0", "xla", true},
		{"any backend", string(good), "xla@1.2.0", "", true},
		{"other plugin version", string(good), "xla@1.3.0", "xla", false},
		{"other backend", string(good), "xla@1.2.0", "pt2", false},
		{"truncated", string(good[:len(good)/2]), "xla@1.2.0", "xla", false},
		{"bad key", strings.Replace(string(good), k.String(), "00", 1), "xla@1.2.0", "xla", false},
		{"future version", strings.Replace(string(good), `"v":1`, `"v":2`, 1), "xla@1.2.0", "xla", false},
		{"too large", `{"v":1,"x":"` + strings.Repeat("x", MaxSharedMemoBytes) + `"}`, "xla@1.2.0", "xla", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := decodeMemo([]byte(tt.value), tt.plugin, tt.backend)
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			if tt.ok && (res.Key != k || res.Components["a"] != "b" || !res.Memo || res.CanonicalSize != 9) {
				t.Fatalf("decoded %+v", res)
			}
		})
	}
}
