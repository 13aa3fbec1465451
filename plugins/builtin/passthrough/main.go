// Command passthrough is the built-in plugin for clients that already hold a
// stable key of their own (JAX's "jit_f-<sha256>", PyTorch "pt2:" keys,
// Triton keys).
//
// Signature: {"backend": "passthrough", "kind": "jax", "key": "jit_f-0a1b…"}.
// kind names the key's origin and must match [a-z0-9][a-z0-9._-]{0,62};
// key is 1 to 4096 bytes of printable ASCII. Canonical bytes are
// kind ‖ 0x00 ‖ key; the display name is the key (truncated). Any other
// field is rejected, so that nothing silently fails to reach the key.
//
// Build with scripts/build-plugins.sh.
package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cachesvc/cachesvc/plugins/sdk"
)

const maxKeyBytes = 4096

func init() {
	sdk.Register(sdk.Description{
		Name:     "passthrough",
		Version:  "1.0.0",
		Backends: []string{"passthrough"},
		Reads:    []string{"backend", "kind", "key"},
	}, canonicalize)
}

type signature struct {
	Backend string `json:"backend"`
	Kind    string `json:"kind"`
	Key     string `json:"key"`
}

func canonicalize(in []byte) (sdk.Result, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(in, &fields); err != nil {
		return sdk.Result{}, fmt.Errorf("signature is not a JSON object: %w", err)
	}
	for name := range fields {
		if name != "backend" && name != "kind" && name != "key" {
			return sdk.Result{}, fmt.Errorf("unknown field %q: a passthrough signature has only backend, kind and key", name)
		}
	}
	var s signature
	if err := json.Unmarshal(in, &s); err != nil {
		return sdk.Result{}, fmt.Errorf("decode signature: %w", err)
	}
	if err := validKind(s.Kind); err != nil {
		return sdk.Result{}, err
	}
	if err := validKey(s.Key); err != nil {
		return sdk.Result{}, err
	}
	canonical := make([]byte, 0, len(s.Kind)+1+len(s.Key))
	canonical = append(canonical, s.Kind...)
	canonical = append(canonical, 0)
	canonical = append(canonical, s.Key...)
	display := s.Key
	if len(display) > 200 {
		display = display[:200] + "..."
	}
	return sdk.Result{
		Canonical:   canonical,
		Components:  map[string]string{"kind": s.Kind},
		DisplayName: display,
	}, nil
}

func validKind(k string) error {
	if k == "" {
		return errors.New("field kind is required (for example \"jax\", \"pt2\", \"triton\")")
	}
	if len(k) > 63 {
		return fmt.Errorf("kind is %d bytes; at most 63 are allowed", len(k))
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return fmt.Errorf("kind %q must match [a-z0-9][a-z0-9._-]{0,62}", k)
		}
	}
	return nil
}

func validKey(k string) error {
	if k == "" {
		return errors.New("field key is required")
	}
	if len(k) > maxKeyBytes {
		return fmt.Errorf("key is %d bytes; at most %d are allowed", len(k), maxKeyBytes)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("key has byte 0x%02x at offset %d; only printable ASCII is allowed", c, i)
		}
	}
	return nil
}

func main() {}
