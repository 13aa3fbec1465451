// Command nondet is a test plugin that breaks the determinism rule: its
// canonical bytes include a counter of previous calls, so a second call on the
// same instance differs from the first. plugin check must reject it.
package main

import (
	"strconv"

	"github.com/cachesvc/cachesvc/plugins/sdk"
)

var calls int

func init() {
	sdk.Register(sdk.Description{Name: "nondet", Version: "1", Backends: []string{"nondet"}},
		func(in []byte) (sdk.Result, error) {
			calls++
			return sdk.Result{Canonical: strconv.AppendInt(append([]byte(nil), in...), int64(calls), 10)}, nil
		})
}

func main() {}
