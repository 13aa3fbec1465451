// Command xla is the built-in cachesvc plugin for the "xla" backend (JAX and
// XLA compiles). It is built for wasip1 as a reactor module:
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared -o xla.wasm .
//
// The canonicalization itself lives in the pure-Go package xlacanon, which is
// also used natively; this file only registers it with the plugin SDK. The
// signature schema is documented in SCHEMA.md.
package main

import (
	"github.com/cachesvc/cachesvc/plugins/builtin/xla/xlacanon"
	"github.com/cachesvc/cachesvc/plugins/sdk"
)

// Version is hashed into every key this plugin makes (as "xla@Version"):
// bump it whenever the canonical bytes for some input change.
const Version = "1.0.0"

// canon keeps its buffers between calls: the host calls one instance from one
// goroutine at a time, and the SDK copies nothing it does not need to.
var canon xlacanon.Canonicalizer

func init() {
	sdk.Register(sdk.Description{
		Name:     "xla",
		Version:  Version,
		Backends: []string{xlacanon.Backend},
		Reads: []string{"backend", "module", "module_b64", "module_format", "platform", "platform_version",
			"jaxlib_version", "jaxlib_build", "xla_flags", "compile_options", "topology", "codec", "extra"},
	}, canonicalize)
	sdk.RegisterNormalize(canon.Normalize)
}

func canonicalize(signature []byte) (sdk.Result, error) {
	r, err := canon.Canonicalize(signature)
	if err != nil {
		return sdk.Result{}, err
	}
	return sdk.Result{Canonical: r.Canonical, Components: r.Components, DisplayName: r.DisplayName}, nil
}

func main() {}
