// Command pt2 is the built-in cachesvc plugin for the "pt2" backend:
// PyTorch torch.compile's remote caches (FX graph, AOTAutograd, autotune,
// bundled autotune, Dynamo PGO), Triton's kernel cache and Mega-Cache
// blobs. It is built for wasip1 as a reactor module by
// scripts/build-plugins.sh. The canonicalization lives in the pure-Go
// package pt2sig; the signature schema is documented in SCHEMA.md.
package main

import (
	"github.com/cachesvc/cachesvc/plugins/builtin/pt2/pt2sig"
	"github.com/cachesvc/cachesvc/plugins/sdk"
)

// Version is hashed into every key this plugin makes (as "pt2@Version"):
// bump it whenever the canonical bytes for some input change.
const Version = "1.0.0"

func init() {
	sdk.Register(sdk.Description{
		Name:     "pt2",
		Version:  Version,
		Backends: []string{pt2sig.Backend},
		Reads: []string{"backend", "key", "cache", "format", "name", "torch_version", "triton_version",
			"device", "device_capability", "inductor_config", "graph", "other"},
	}, canonicalize)
	sdk.RegisterNormalize(normalize)
}

func canonicalize(signature []byte) (sdk.Result, error) {
	r, err := pt2sig.Canonicalize(signature)
	if err != nil {
		return sdk.Result{}, err
	}
	return sdk.Result{Canonical: r.Canonical, Components: r.Components, DisplayName: r.DisplayName}, nil
}

func normalize(signature []byte) ([]byte, error) {
	r, err := pt2sig.Canonicalize(signature)
	if err != nil {
		return nil, err
	}
	return r.Normal, nil
}

func main() {}
