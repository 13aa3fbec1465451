package jaxcache_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cachesvc/cachesvc/jaxcache"
)

// Writing an entry the way `cachesvc warm` does: atomically, skipped when
// present, in JAX's "<key>-cache" + "<key>-atime" layout.
func ExampleDir_Write() {
	tmp, _ := os.MkdirTemp("", "jaxcache-example-")
	defer os.RemoveAll(tmp)
	d, err := jaxcache.Open(filepath.Join(tmp, "jax"))
	if err != nil {
		fmt.Println(err)
		return
	}
	name := "jit_f-" + strings.Repeat("ab", 32)
	for i := 0; i < 2; i++ {
		written, err := d.Write(name, strings.NewReader("compressed executable"), "", time.Now())
		fmt.Println(written, err)
	}
	files, _ := os.ReadDir(d.Path())
	for _, f := range files {
		fmt.Println(strings.Replace(f.Name(), strings.Repeat("ab", 32), "<hex>", 1))
	}
	// Output:
	// true <nil>
	// false <nil>
	// jit_f-<hex>-atime
	// jit_f-<hex>-cache
}
