package keying

import (
	"strings"
	"testing"

	"github.com/cachesvc/cachesvc/cachekey"
)

func TestDecodeMemo(t *testing.T) {
	var k cachekey.Key
	k[0] = 7
	code, other := strings.Repeat("c0", 32), strings.Repeat("d1", 32)
	good, err := encodeMemo(Result{Key: k, Backend: "xla", Plugin: "xla@1.2.0", PluginSHA256: code, DisplayName: "f", Components: map[string]string{"a": "b"}, CanonicalSize: 9})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, value, plugin, code, backend string
		ok                                 bool
	}{
		{"round trip", string(good), "xla@1.2.0", code, "xla", true},
		{"any backend", string(good), "xla@1.2.0", code, "", true},
		{"any plugin and code (the memo file)", string(good), "", "", "", true},
		{"other plugin version", string(good), "xla@1.3.0", code, "xla", false},
		{"other code of the version", string(good), "xla@1.2.0", other, "xla", false},
		{"no code", strings.Replace(string(good), `"code":"`+code+`",`, "", 1), "", "", "", false},
		{"format 1 (no code)", strings.Replace(strings.Replace(string(good), `"code":"`+code+`",`, "", 1), `"v":2`, `"v":1`, 1), "xla@1.2.0", "", "xla", false},
		{"other backend", string(good), "xla@1.2.0", code, "pt2", false},
		{"truncated", string(good[:len(good)/2]), "xla@1.2.0", code, "xla", false},
		{"bad key", strings.Replace(string(good), k.String(), "00", 1), "xla@1.2.0", code, "xla", false},
		{"future version", strings.Replace(string(good), `"v":2`, `"v":3`, 1), "xla@1.2.0", code, "xla", false},
		{"too large", `{"v":2,"x":"` + strings.Repeat("x", MaxSharedMemoBytes) + `"}`, "xla@1.2.0", code, "xla", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := decodeMemo([]byte(tt.value), tt.plugin, tt.code, tt.backend)
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			if tt.ok && (res.Key != k || res.PluginSHA256 != code || res.Components["a"] != "b" || !res.Memo || res.CanonicalSize != 9) {
				t.Fatalf("decoded %+v", res)
			}
		})
	}
}
