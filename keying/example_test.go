package keying_test

import (
	"fmt"

	"github.com/cachesvc/cachesvc/keying"
)

// ExampleComputeKey shows the key formula: the plugin's identity, the backend
// and the canonical bytes, NUL-separated, hashed with SHA-256.
func ExampleComputeKey() {
	k := keying.ComputeKey("passthrough@1.0.0", "passthrough", []byte("jax\x00jit_f-0a1b"))
	fmt.Println(k)
	// Output: d82efbebde5a7310f1d9d8db3378baa471031c035d8c045e6227c8e85d96adc8
}
