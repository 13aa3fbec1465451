// Command emptyfix is the empty test plugin after a "bug fix" that changes
// its keys but not its name@version: it describes itself as empty@1 too and
// prefixes its canonical bytes with "fixed:". Tests load it in place of
// empty.wasm to check that no memo serves keys another build computed.
package main

import "github.com/cachesvc/cachesvc/plugins/sdk"

func init() {
	sdk.Register(sdk.Description{Name: "empty", Version: "1", Backends: []string{"empty"}},
		func(in []byte) (sdk.Result, error) {
			return sdk.Result{Canonical: append([]byte("fixed:"), in...)}, nil
		})
}

func main() {}
