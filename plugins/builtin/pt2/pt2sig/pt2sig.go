// Package pt2sig canonicalizes signatures of the "pt2" backend: PyTorch's
// torch.compile caches (Inductor's FX graph cache, AOTAutograd, autotune,
// bundled autotune, Dynamo PGO), Triton's kernel cache and Mega-Cache
// blobs. It is pure Go, used by the built-in pt2 Wasm plugin and natively
// by tests. The schema is documented in ../SCHEMA.md.
//
// Torch computes its own keys, hashing everything that decides the
// compiled artifact (graph, inductor config, torch and Triton versions,
// device); the canonical bytes are therefore exactly torch's (cache id,
// key, format) triple, so the same torch key gives the same cachesvc key
// whether it arrives through the Redis protocol (the full "pt2:…" key,
// nothing else) or through cachesvc.torch (with components). The optional
// fields only name parts for explaining misses: they never split or merge
// keys.
package pt2sig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Backend is the backend name this package canonicalizes.
const Backend = "pt2"

// MaxKeyBytes bounds the key field; torch's keys are under 200 bytes.
const MaxKeyBytes = 4096

// MaxFieldBytes bounds each optional field.
const MaxFieldBytes = 256

// Cache kinds: the "cache" component, derived from torch's cache id.
const (
	KindFxGraph         = "fxgraph"
	KindAOTAutograd     = "aotautograd"
	KindAutotune        = "autotune"
	KindBundledAutotune = "bundled-autotune"
	KindPGO             = "pgo"
	KindTriton          = "triton"
	KindMega            = "mega"
	// KindCpp is Inductor's compiled C++ kernel libraries: torch 2.15 keeps
	// them only on local disk, so cachesvc.torch stores them under cache id
	// "inductor-cpp" (a key of its own, like ccache's).
	KindCpp = "cpp"
)

// kindOfCacheID maps torch 2.x's fixed cache ids to kinds. Any other cache
// id is an autotune one: torch names each autotuned kernel's remote cache
// by a digest of the kernel, its backend and its configs.
var kindOfCacheID = map[string]string{
	"fx-graph-v1":           KindFxGraph,
	"autograd-experimental": KindAOTAutograd,
	"autograd-v1":           KindAOTAutograd,
	"bundled-autotune-v1":   KindBundledAutotune,
	"dynamo-pgo":            KindPGO,
	"inductor-cpp":          KindCpp,
}

// componentFields are the optional fields, each shown as a component of
// the same name on a miss.
var componentFields = []string{"torch_version", "triton_version", "device", "device_capability",
	"inductor_config", "graph", "other"}

// megaFields are the environment fields a Mega-Cache key is made of, in
// canonical order; the first two are required.
var megaFields = []string{"torch_version", "device", "triton_version", "device_capability"}

// Result is one canonicalized signature.
type Result struct {
	// Canonical is the byte string the key is a digest of.
	Canonical []byte
	// Components name the signature's parts: "cache" (the kind) and each
	// optional field given.
	Components map[string]string
	// DisplayName is the "name" field, or the kind and a short key.
	DisplayName string
	// Normal is the signature in normal form: the full key and the
	// fields that were given, which canonicalizes to the same bytes.
	Normal []byte
}

// Canonicalize parses one pt2 signature (a JSON object) and returns its
// canonical bytes and components. Unknown fields are rejected so that
// nothing a client sends silently fails to reach the key.
func Canonicalize(in []byte) (Result, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(in, &raw); err != nil {
		return Result{}, fmt.Errorf("signature is not a JSON object: %w", err)
	}
	fields := make(map[string]string, len(raw))
	for name, v := range raw {
		if !known(name) {
			return Result{}, fmt.Errorf("unknown field %q: a pt2 signature has backend, key, cache, format, name and %s",
				name, strings.Join(componentFields, ", "))
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return Result{}, fmt.Errorf("field %q must be a string", name)
		}
		fields[name] = s
	}
	if b := fields["backend"]; b != Backend {
		return Result{}, fmt.Errorf("field backend is %q; this plugin canonicalizes %q", b, Backend)
	}
	for name, v := range fields {
		if name == "key" || name == "backend" {
			continue
		}
		if err := checkText(name, v, MaxFieldBytes); err != nil {
			return Result{}, err
		}
	}
	if err := checkText("key", fields["key"], MaxKeyBytes); err != nil {
		return Result{}, err
	}
	if fields["key"] == "" {
		return Result{}, errors.New(`field key is required: torch's Redis key ("pt2:<cache id>::<key>:c1"), Triton's ("triton:<key>:<file>"), or a bare key with field cache`)
	}
	kind, full, err := resolve(fields)
	if err != nil {
		return Result{}, err
	}
	comps := map[string]string{"cache": kind}
	for _, name := range componentFields {
		if v, ok := fields[name]; ok && v != "" {
			comps[name] = v
		}
	}
	canonical := make([]byte, 0, len(full)+16)
	canonical = append(canonical, full...)
	if kind == KindMega {
		for _, name := range megaFields {
			canonical = append(canonical, 0)
			canonical = append(canonical, fields[name]...)
		}
	}
	display := fields["name"]
	if display == "" {
		display = kind + " " + shortKey(fields["key"], kind)
	}
	return Result{Canonical: canonical, Components: comps, DisplayName: display, Normal: normal(fields, full)}, nil
}

// resolve classifies the key and returns its kind and full form.
func resolve(f map[string]string) (kind, full string, err error) {
	key, cache, format := f["key"], f["cache"], f["format"]
	switch {
	case cache == KindMega:
		if format != "" {
			return "", "", errors.New("field format does not apply to a Mega-Cache signature (cache \"mega\")")
		}
		for _, name := range megaFields[:2] {
			if f[name] == "" {
				return "", "", fmt.Errorf("a Mega-Cache signature (cache \"mega\") needs field %s: the blob is only valid for one environment", name)
			}
		}
		return KindMega, "mega::" + key, nil
	case strings.HasPrefix(key, "pt2:"):
		id, _, ver, err := splitTorchKey(key)
		if err != nil {
			return "", "", err
		}
		if cache != "" && cache != id {
			return "", "", fmt.Errorf("field cache is %q but the key names cache id %q", cache, id)
		}
		if format != "" && format != ver {
			return "", "", fmt.Errorf("field format is %q but the key ends in format %q", format, ver)
		}
		return kindOf(id), key, nil
	case strings.HasPrefix(key, "triton:"):
		if cache != "" || format != "" {
			return "", "", errors.New("fields cache and format do not apply to a Triton key")
		}
		if len(key) == len("triton:") {
			return "", "", errors.New(`Triton key "triton:" has nothing after the prefix`)
		}
		return KindTriton, key, nil
	case cache == "":
		return "", "", fmt.Errorf("key %q is neither torch's Redis form (\"pt2:<cache id>::<key>:c1\") nor Triton's (\"triton:…\"); a bare key needs field cache (torch's cache id, e.g. \"fx-graph-v1\")", abbreviate(key))
	}
	if format == "" {
		format = "c1"
	}
	if !isFormat(format) {
		return "", "", fmt.Errorf("field format is %q; torch's formats are c1, c2, …", format)
	}
	if strings.Contains(cache, "::") {
		return "", "", fmt.Errorf("field cache %q contains \"::\"", cache)
	}
	full = "pt2:" + cache + "::" + key + ":" + format
	// The full form must split back into the same parts, or two bare
	// signatures could name one torch key.
	if id, k, _, err := splitTorchKey(full); err != nil || id != cache || k != key {
		return "", "", fmt.Errorf("field cache %q and key %q do not form a torch key \"pt2:<cache id>::<key>:c1\"", cache, abbreviate(key))
	}
	return kindOf(cache), full, nil
}

// splitTorchKey splits "pt2:<cache id>::<key>:<format>".
func splitTorchKey(full string) (id, key, format string, err error) {
	rest := strings.TrimPrefix(full, "pt2:")
	id, tail, ok := strings.Cut(rest, "::")
	if !ok || id == "" {
		return "", "", "", fmt.Errorf("torch key %q lacks its cache id: the form is \"pt2:<cache id>::<key>:c1\"", abbreviate(full))
	}
	i := strings.LastIndexByte(tail, ':')
	if i <= 0 || !isFormat(tail[i+1:]) {
		return "", "", "", fmt.Errorf("torch key %q does not end in a format such as \":c1\"", abbreviate(full))
	}
	return id, tail[:i], tail[i+1:], nil
}

func kindOf(cacheID string) string {
	if k, ok := kindOfCacheID[cacheID]; ok {
		return k
	}
	return KindAutotune
}

// isFormat reports whether s is "c" followed by 1 to 4 digits.
func isFormat(s string) bool {
	if len(s) < 2 || len(s) > 5 || s[0] != 'c' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func known(name string) bool {
	switch name {
	case "backend", "key", "cache", "format", "name":
		return true
	}
	for _, f := range componentFields {
		if f == name {
			return true
		}
	}
	return false
}

// checkText bounds a field and allows printable ASCII only.
func checkText(name, v string, max int) error {
	if len(v) > max {
		return fmt.Errorf("field %s is %d bytes; at most %d are allowed", name, len(v), max)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("field %s has byte 0x%02x at offset %d; only printable ASCII is allowed", name, c, i)
		}
	}
	return nil
}

// shortKey is the key's distinguishing part, shortened for display.
func shortKey(key, kind string) string {
	if kind != KindMega && kind != KindTriton && strings.HasPrefix(key, "pt2:") {
		if _, k, _, err := splitTorchKey(key); err == nil {
			key = k
		}
	}
	key = strings.TrimPrefix(key, "triton:")
	if len(key) > 16 {
		return key[:16] + "…"
	}
	return key
}

func abbreviate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// normal renders the signature's normal form: backend, the full key (or,
// for a Mega-Cache signature, the run and cache), and the other fields
// given, in a fixed order.
func normal(f map[string]string, full string) []byte {
	out := map[string]string{"backend": Backend, "key": full}
	if f["cache"] == KindMega {
		out["key"], out["cache"] = f["key"], KindMega
	}
	for name, v := range f {
		if name != "backend" && name != "key" && name != "cache" && name != "format" {
			out[name] = v
		}
	}
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(n)
		v, _ := json.Marshal(out[n])
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}
