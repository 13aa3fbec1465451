package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"
)

// TestCASBodies checks the shortcut against the definition: the digest from
// the saved SHA-256 state is the SHA-256 of the whole body bazel-remote
// receives (it rejects the PUT otherwise), every body has its size, and
// entries differ.
func TestCASBodies(t *testing.T) {
	for _, size := range []int64{0, 1, 63, 64, 127, 128, 129, 4096, 1<<20 + 13} {
		cfg := config{seed: "test", size: size}
		c := newCASBodies(cfg)
		seen := map[string]bool{}
		for i := 0; i < 3; i++ {
			h := sha256.New()
			n, err := io.Copy(h, c.body(cfg, i))
			if err != nil || n != size {
				t.Fatalf("size %d entry %d: read %d bytes, %v; want %d", size, i, n, err, size)
			}
			want := hex.EncodeToString(h.Sum(nil))
			if got := c.digest(cfg, i); got != want {
				t.Errorf("size %d entry %d: digest %s, sha256 of the body %s", size, i, got, want)
			}
			seen[want] = true
		}
		if size > 0 && len(seen) != 3 {
			t.Errorf("size %d: %d distinct bodies among 3 entries", size, len(seen))
		}
	}
}
