// Command empty is a test plugin that does nothing: its canonical bytes are
// its input. It measures the host's per-call overhead.
package main

import "github.com/cachesvc/cachesvc/plugins/sdk"

func init() {
	sdk.Register(sdk.Description{Name: "empty", Version: "1", Backends: []string{"empty"}},
		func(in []byte) (sdk.Result, error) { return sdk.Result{Canonical: in}, nil })
}

func main() {}
