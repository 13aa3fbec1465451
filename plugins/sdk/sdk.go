// Package sdk is the Go side of the cachesvc plugin ABI (version 1, see
// plugins/ABI.md) for plugin authors.
//
// A plugin is a package main built with
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -buildmode=c-shared -o NAME.wasm .
//
// that registers one canonicalization function, from init or a package-level
// variable (the host runs _initialize, never main):
//
//	func init() {
//		sdk.Register(sdk.Description{
//			Name: "mybackend", Version: "1.0.0",
//			Backends: []string{"mybackend"},
//			Reads:    []string{"backend", "program"},
//		}, canonicalize)
//	}
//
//	func canonicalize(signature []byte) (sdk.Result, error) { ... }
//
//	func main() {}
//
// The package exports alloc, describe and canonicalize to the host through
// //go:wasmexport (only when GOOS=wasip1); on other platforms it still
// compiles, so that a plugin's logic can be tested natively with Invoke.
//
// The SDK imports nothing heavier than sort, strconv and unicode/utf8, and it
// encodes its JSON by hand, so that the per-call overhead stays small.
package sdk

import (
	"errors"
	"sort"
	"strconv"
	"unicode/utf8"
)

// ABIVersion is the version of the host/plugin contract this SDK implements.
const ABIVersion = 1

// Description is what a plugin says about itself through describe.
type Description struct {
	// Name identifies the plugin; name@version is hashed into every key it
	// makes. It must match [a-z0-9][a-z0-9._-]{0,62}.
	Name string
	// Version must change whenever the canonical bytes for some input would
	// change. It must match [0-9A-Za-z][0-9A-Za-z.+_-]{0,63}.
	Version string
	// Backends lists the signature "backend" values this plugin handles.
	Backends []string
	// Reads lists the signature fields the plugin reads (documentation and
	// conformance checks; the host does not filter the input).
	Reads []string
}

// Result is the outcome of one successful canonicalization.
type Result struct {
	// Canonical is the canonical form of the signature; the key is a digest
	// of it. It may alias the input slice.
	Canonical []byte
	// Components names digests (or short values) of the signature's parts so
	// that a cache miss can be explained; keys and values are free-form text.
	Components map[string]string
	// DisplayName is a human-readable name for the program (for example the
	// module name); it is not part of the key.
	DisplayName string
}

// Func canonicalizes one signature. The signature slice is owned by the SDK
// and is reused by the next call: a Func must not retain it after returning,
// except through Result.Canonical.
type Func func(signature []byte) (Result, error)

// NormalizeFunc rewrites a signature into its normal form: a signature JSON
// of the same backend whose fields are already canonical, so that
// canonicalizing it gives the same canonical bytes (see ABI.md, normalize).
// The same ownership rule as for Func applies to its argument.
type NormalizeFunc func(signature []byte) ([]byte, error)

var (
	registered Description
	handler    Func
	normalizer NormalizeFunc
)

// ErrNotRegistered is returned by Invoke when no function was registered.
var ErrNotRegistered = errors.New("no canonicalize function registered")

// Register installs the plugin's description and canonicalization function.
// Call it exactly once, from init or a package-level variable initializer;
// a later call replaces the earlier one.
func Register(d Description, fn Func) {
	registered = d
	handler = fn
}

// RegisterNormalize installs the optional normalize function that
// `cachesvc plugin check` uses to verify idempotence. Plugins whose canonical
// bytes are not themselves a signature should provide it.
func RegisterNormalize(fn NormalizeFunc) {
	normalizer = fn
}

// Describe returns the describe JSON of the registered plugin.
func Describe() []byte {
	return AppendDescribe(nil, registered)
}

// AppendDescribe appends the describe JSON for d to dst.
func AppendDescribe(dst []byte, d Description) []byte {
	dst = append(dst, `{"abi":`...)
	dst = strconv.AppendInt(dst, ABIVersion, 10)
	dst = append(dst, `,"name":`...)
	dst = appendString(dst, d.Name)
	dst = append(dst, `,"version":`...)
	dst = appendString(dst, d.Version)
	dst = append(dst, `,"backends":`...)
	dst = appendStrings(dst, d.Backends)
	dst = append(dst, `,"reads":`...)
	dst = appendStrings(dst, d.Reads)
	return append(dst, '}')
}

// InvokeNormalize runs the registered normalize function natively; it
// returns ErrNotRegistered when there is none.
func InvokeNormalize(signature []byte) ([]byte, error) {
	if normalizer == nil {
		return nil, ErrNotRegistered
	}
	return normalizer(signature)
}

// Invoke runs the registered function on signature natively (no wasm) and
// returns its result; it is meant for a plugin's own tests.
func Invoke(signature []byte) (Result, error) {
	if handler == nil {
		return Result{}, ErrNotRegistered
	}
	return handler(signature)
}

// AppendResult appends the canonicalize result JSON for r to dst, with the
// canonical bytes described by (canonPtr, len(r.Canonical)) as ABI.md
// specifies.
func AppendResult(dst []byte, r Result, canonPtr uint32) []byte {
	dst = append(dst, `{"canonical_ptr":`...)
	dst = strconv.AppendUint(dst, uint64(canonPtr), 10)
	dst = append(dst, `,"canonical_len":`...)
	dst = strconv.AppendUint(dst, uint64(len(r.Canonical)), 10)
	dst = append(dst, `,"display_name":`...)
	dst = appendString(dst, r.DisplayName)
	dst = append(dst, `,"components":{`...)
	if len(r.Components) == 0 {
		return append(dst, "}}"...)
	}
	keys := make([]string, 0, len(r.Components))
	for k := range r.Components {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = appendString(dst, r.Components[k])
	}
	return append(dst, "}}"...)
}

// AppendNormalized appends the normalize result JSON for a normalized
// signature of length n at ptr to dst.
func AppendNormalized(dst []byte, ptr uint32, n int) []byte {
	dst = append(dst, `{"normalized_ptr":`...)
	dst = strconv.AppendUint(dst, uint64(ptr), 10)
	dst = append(dst, `,"normalized_len":`...)
	dst = strconv.AppendUint(dst, uint64(n), 10)
	return append(dst, '}')
}

// AppendError appends the canonicalize error JSON for msg to dst.
func AppendError(dst []byte, msg string) []byte {
	dst = append(dst, `{"error":`...)
	dst = appendString(dst, msg)
	return append(dst, '}')
}

func appendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
