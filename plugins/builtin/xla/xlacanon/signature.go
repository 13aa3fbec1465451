package xlacanon

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
)

// Module formats accepted in the module_format field.
const (
	FormatStableHLO    = "stablehlo"     // StableHLO/MHLO/MLIR text
	FormatHLO          = "hlo"           // HLO text
	FormatMLIRBytecode = "mlir_bytecode" // MLIR bytecode (module_b64 only), kept verbatim
)

// Backend is the signature backend this package canonicalizes.
const Backend = "xla"

// canonicalMagic starts every canonical record; bump it (and the plugin
// version) whenever the canonical bytes for some input change.
const canonicalMagic = "cachesvc-xla-canonical/1\n"

// Sentinel errors; every error returned by this package wraps one of them.
var (
	// ErrSignature reports a malformed signature (JSON, field names or types).
	ErrSignature = errors.New("invalid xla signature")
	// ErrModule reports module text that cannot be canonicalized.
	ErrModule = errors.New("invalid module text")
)

// shortValue is the longest field value copied verbatim into a component;
// longer values are replaced by their digest.
const shortValue = 128

// Result is one canonicalized signature.
type Result struct {
	// Canonical is the framed canonical record (see SCHEMA.md); the cache
	// key is a digest of it. It is owned by the Canonicalizer and valid until
	// its next call.
	Canonical []byte
	// Module is the canonical module text (a sub-slice of Canonical).
	Module []byte
	// Components holds digests or short values of each part of the
	// signature, so that a miss can name the part that differs.
	Components map[string]string
	// DisplayName is the module name (for example "jit_f"); not in the key.
	DisplayName string
}

// signature is a parsed signature; the module bytes live in the
// Canonicalizer's buffer.
type signature struct {
	module          []byte
	format          string
	platform        string
	platformVersion string
	jaxlibVersion   string
	jaxlibBuild     string // hex digest of the jaxlib build, "" if absent
	compileOptions  string
	codec           string
	topology        []byte // canonical JSON (string or array of strings), nil if absent
	extra           []byte // compact JSON, nil if absent
	flags           []string
}

// Canonicalizer canonicalizes signatures, reusing its buffers from call to
// call. It is not safe for concurrent use; the zero value is ready.
type Canonicalizer struct {
	ssa  ssaNames
	mod  []byte // decoded module
	out  []byte // canonical record
	norm []byte // normalized signature
	key  []byte // scratch for field names
	// modHigh reports that mod may hold a byte >= 0x80; when it does not,
	// mod is ASCII and parse skips utf8.Valid.
	modHigh bool
}

// Canonicalize is a convenience wrapper around a fresh Canonicalizer; its
// result does not alias sig.
func Canonicalize(sig []byte) (Result, error) {
	var c Canonicalizer
	return c.Canonicalize(sig)
}

// Canonicalize parses the signature JSON sig and returns its canonical
// record, components and display name. The result aliases c's buffers and is
// valid until the next call on c.
//
// # Errors
//
// Errors wrap ErrSignature (malformed JSON, unknown or duplicate fields,
// wrong types, missing backend/module/platform, a bad module_format or
// base64, invalid UTF-8, a flag that is not a flag) or ErrModule (an
// unterminated string, loc( or metadata={ in the module text).
func (c *Canonicalizer) Canonicalize(sig []byte) (Result, error) {
	s, err := c.parse(sig)
	if err != nil {
		return Result{}, err
	}
	out := c.out[:0]
	if need := len(s.module) + 1024; cap(out) < need {
		out = make([]byte, 0, need+need/8)
	}
	out = append(out, canonicalMagic...)
	out = appendSection(out, "module_format", s.format)
	out = appendSection(out, "platform", s.platform)
	out = appendSection(out, "platform_version", s.platformVersion)
	out = appendSection(out, "jaxlib_version", s.jaxlibVersion)
	if s.jaxlibBuild != "" {
		// Only when present, so that the records (and keys) of signatures
		// without it are exactly what they were before the field existed.
		out = appendSection(out, "jaxlib_build", s.jaxlibBuild)
	}
	out = appendSection(out, "compile_options", s.compileOptions)
	out = appendSection(out, "topology", string(s.topology))
	out = appendSection(out, "codec", s.codec)
	out = appendSection(out, "extra", string(s.extra))
	out = append(out, "xla_flags "...)
	out = strconv.AppendInt(out, int64(len(s.flags)), 10)
	out = append(out, '\n')
	for _, f := range s.flags {
		out = strconv.AppendInt(out, int64(len(f)), 10)
		out = append(out, '\n')
		out = append(out, f...)
		out = append(out, '\n')
	}
	// The module goes last, behind a fixed-width length patched afterwards,
	// so that it is written straight into the record.
	out = append(out, "module "...)
	lenAt := len(out)
	out = append(out, "00000000000000000000\n"...)
	modAt := len(out)
	var name string
	switch s.format {
	case FormatStableHLO:
		out, name, err = c.canonMLIR(out, s.module)
	case FormatHLO:
		out, name, err = canonHLO(out, s.module)
	default:
		out = append(out, s.module...)
	}
	if err != nil {
		return Result{}, err
	}
	modLen := len(out) - modAt
	if modLen == 0 {
		return Result{}, fmt.Errorf("%w: module is empty after removing locations, comments and whitespace", ErrModule)
	}
	digits := strconv.AppendInt(c.key[:0], int64(modLen), 10)
	copy(out[lenAt+20-len(digits):lenAt+20], digits)
	out = append(out, '\n')
	c.out = out
	module := out[modAt : modAt+modLen]

	comp := make(map[string]string, 12)
	comp["module"] = digest(module)
	comp["module_format"] = s.format
	comp["module_bytes"] = strconv.Itoa(modLen)
	comp["platform"] = short([]byte(s.platform))
	comp["platform_version"] = short([]byte(s.platformVersion))
	comp["jaxlib_version"] = short([]byte(s.jaxlibVersion))
	if s.jaxlibBuild != "" {
		comp["jaxlib_build"] = s.jaxlibBuild
	}
	comp["compile_options"] = short([]byte(s.compileOptions))
	comp["topology"] = short(s.topology)
	comp["codec"] = short([]byte(s.codec))
	comp["extra"] = short(s.extra)
	var fl []byte
	for i, f := range s.flags {
		if i > 0 {
			fl = append(fl, ' ')
		}
		fl = append(fl, f...)
	}
	comp["xla_flags"] = short(fl)
	return Result{Canonical: out, Module: module, Components: comp, DisplayName: name}, nil
}

// Normalize returns the signature in normal form: a signature JSON whose
// module is the canonical module text, whose flags are filtered and sorted
// and whose fields are in a fixed order. Canonicalizing it gives the same
// canonical record as canonicalizing sig, and normalizing it again gives the
// same bytes (the plugin check's idempotence test). The result is owned by c
// and valid until its next call.
func (c *Canonicalizer) Normalize(sig []byte) ([]byte, error) {
	res, err := c.Canonicalize(sig)
	if err != nil {
		return nil, err
	}
	s, err := c.parse(sig) // fields again (the record holds them framed)
	if err != nil {
		return nil, err
	}
	b := c.norm[:0]
	b = append(b, `{"backend":"xla","module_format":`...)
	b = appendJSONString(b, []byte(s.format))
	if s.format == FormatMLIRBytecode {
		b = append(b, `,"module_b64":"`...)
		b = base64.StdEncoding.AppendEncode(b, res.Module)
		b = append(b, '"')
	} else {
		b = append(b, `,"module":`...)
		b = appendJSONString(b, res.Module)
	}
	for _, f := range [...]struct{ k, v string }{
		{"platform", s.platform}, {"platform_version", s.platformVersion},
		{"jaxlib_version", s.jaxlibVersion}, {"jaxlib_build", s.jaxlibBuild},
		{"compile_options", s.compileOptions},
		{"codec", s.codec},
	} {
		if f.v != "" {
			b = append(b, ',', '"')
			b = append(b, f.k...)
			b = append(b, '"', ':')
			b = appendJSONString(b, []byte(f.v))
		}
	}
	if len(s.flags) > 0 {
		b = append(b, `,"xla_flags":[`...)
		for i, f := range s.flags {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, []byte(f))
		}
		b = append(b, ']')
	}
	if s.topology != nil {
		b = append(b, `,"topology":`...)
		b = append(b, s.topology...)
	}
	if s.extra != nil {
		b = append(b, `,"extra":`...)
		b = append(b, s.extra...)
	}
	b = append(b, '}')
	c.norm = b
	return b, nil
}

func appendSection(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(len(value)), 10)
	dst = append(dst, '\n')
	dst = append(dst, value...)
	return append(dst, '\n')
}

// digest labels the XXH64 of b (see xxh64.go for why not SHA-256).
func digest(b []byte) string {
	var d [8]byte
	binary.BigEndian.PutUint64(d[:], xxh64(b))
	return "xxh64:" + hex.EncodeToString(d[:])
}

// short returns b itself when it is short printable text, else its digest.
func short(b []byte) string {
	if len(b) <= shortValue && !bytes.ContainsAny(b, "\x00\n\r") {
		return string(b)
	}
	return digest(b)
}

// detectFormat tells StableHLO/MLIR text, HLO text and MLIR bytecode apart
// by their first token; it returns "" when unsure.
func detectFormat(m []byte) string {
	if bytes.HasPrefix(m, []byte("ML\xefR")) {
		return FormatMLIRBytecode
	}
	i := 0
	for {
		i = skipSpace(m, i)
		switch {
		case hasPrefixAt(m, i, "//"):
			i = lineEnd(m, i)
			continue
		case hasPrefixAt(m, i, "/*"):
			k := bytes.Index(m[i+2:], []byte("*/"))
			if k < 0 {
				return ""
			}
			i += 2 + k + 2
			continue
		}
		break
	}
	if hasPrefixAt(m, i, "HloModule") {
		return FormatHLO
	}
	for _, p := range []string{"module", "#", "!", "func.func", "builtin.module", `"builtin.module"`, `"func.func"`} {
		if hasPrefixAt(m, i, p) {
			return FormatStableHLO
		}
	}
	return ""
}

// CanonicalModule canonicalizes module text alone (format "" = detect) and
// returns the canonical text, the display name and the format used.
func CanonicalModule(module []byte, format string) ([]byte, string, string, error) {
	if format == "" {
		format = detectFormat(module)
	}
	var c Canonicalizer
	var out []byte
	var name string
	var err error
	switch format {
	case FormatStableHLO:
		out, name, err = c.canonMLIR(nil, module)
	case FormatHLO:
		out, name, err = canonHLO(nil, module)
	case FormatMLIRBytecode:
		out = append([]byte(nil), module...)
	default:
		return nil, "", "", fmt.Errorf("%w: cannot tell the module format", ErrSignature)
	}
	return out, name, format, err
}
