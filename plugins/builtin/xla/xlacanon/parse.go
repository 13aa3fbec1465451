package xlacanon

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Field bits, to reject duplicates.
const (
	fBackend = 1 << iota
	fModule
	fModuleB64
	fFormat
	fPlatform
	fPlatformVersion
	fJaxlibVersion
	fJaxlibBuild
	fFlags
	fCompileOptions
	fTopology
	fCodec
	fExtra
)

var fieldBits = map[string]int{
	"backend": fBackend, "module": fModule, "module_b64": fModuleB64,
	"module_format": fFormat, "platform": fPlatform,
	"platform_version": fPlatformVersion, "jaxlib_version": fJaxlibVersion,
	"jaxlib_build": fJaxlibBuild,
	"xla_flags":    fFlags, "compile_options": fCompileOptions,
	"topology": fTopology, "codec": fCodec, "extra": fExtra,
}

// parse reads the signature JSON into a signature; the module is decoded
// into c.mod.
func (c *Canonicalizer) parse(sig []byte) (signature, error) {
	var s signature
	r := jreader{b: sig}
	r.ws()
	if r.peek() != '{' {
		return s, r.errorf("a signature must be a JSON object")
	}
	r.i++
	seen := 0
	var backend string
	var err error
	r.ws()
	if r.peek() == '}' {
		r.i++
	} else {
		for {
			r.ws()
			c.key, err = r.str(c.key[:0])
			if err != nil {
				return s, err
			}
			bit, ok := fieldBits[string(c.key)]
			if !ok {
				return s, fmt.Errorf("%w: unknown field %q (known: backend, module, module_b64, module_format, platform, platform_version, jaxlib_version, jaxlib_build, xla_flags, compile_options, topology, codec, extra)", ErrSignature, c.key)
			}
			if seen&bit != 0 {
				return s, fmt.Errorf("%w: duplicate field %q", ErrSignature, c.key)
			}
			seen |= bit
			field := string(c.key)
			r.ws()
			if r.peek() != ':' {
				return s, r.errorf("expected ':' after field %q", field)
			}
			r.i++
			r.ws()
			if err := c.field(&r, &s, bit, field, &backend); err != nil {
				return s, err
			}
			r.ws()
			if r.peek() == ',' {
				r.i++
				continue
			}
			if r.peek() == '}' {
				r.i++
				break
			}
			return s, r.errorf("expected ',' or '}' after field %q", field)
		}
	}
	r.ws()
	if r.i != len(sig) {
		return s, r.errorf("unexpected data after the signature object")
	}
	switch {
	case seen&fBackend == 0:
		return s, fmt.Errorf("%w: missing field \"backend\"", ErrSignature)
	case backend != Backend:
		return s, fmt.Errorf("%w: backend is %q, this plugin handles %q", ErrSignature, backend, Backend)
	case seen&(fModule|fModuleB64) == 0:
		return s, fmt.Errorf("%w: missing field \"module\" (or \"module_b64\")", ErrSignature)
	case seen&fModule != 0 && seen&fModuleB64 != 0:
		return s, fmt.Errorf("%w: give either \"module\" or \"module_b64\", not both", ErrSignature)
	case s.platform == "":
		return s, fmt.Errorf("%w: missing field \"platform\" (cpu, cuda, rocm, tpu …): it is part of the key", ErrSignature)
	case len(c.mod) == 0:
		return s, fmt.Errorf("%w: module is empty", ErrSignature)
	}
	s.module = c.mod
	detected := detectFormat(s.module)
	if detected != FormatMLIRBytecode && c.modHigh && !utf8.Valid(s.module) {
		return s, fmt.Errorf("%w: module is not valid UTF-8", ErrSignature)
	}
	switch {
	case s.format == "" && detected == "":
		return s, fmt.Errorf("%w: cannot tell the module format (expected StableHLO text starting with \"module\" or HLO text starting with \"HloModule\"); set module_format", ErrSignature)
	case s.format == "":
		s.format = detected
	case detected != "" && detected != s.format:
		return s, fmt.Errorf("%w: module_format is %q but the module looks like %s", ErrSignature, s.format, detected)
	}
	if s.format == FormatMLIRBytecode && seen&fModuleB64 == 0 {
		return s, fmt.Errorf("%w: MLIR bytecode must be sent as module_b64", ErrSignature)
	}
	return s, nil
}

// field parses the value of one field.
func (c *Canonicalizer) field(r *jreader, s *signature, bit int, name string, backend *string) error {
	var err error
	optional := func(dst *string) error {
		if r.null() {
			return nil
		}
		var v []byte
		v, err = r.str(nil)
		if err != nil {
			return err
		}
		if r.high && !utf8.Valid(v) {
			return fmt.Errorf("%w: field %q is not valid UTF-8", ErrSignature, name)
		}
		*dst = string(v)
		return nil
	}
	switch bit {
	case fBackend:
		return optional(backend)
	case fModule:
		// The module is never longer than the rest of the input: sizing
		// c.mod for that once spares a first large call twenty doublings,
		// their copies and their garbage (which stays in a plugin
		// instance's linear memory for good).
		if n := len(r.b) - r.i + 16; cap(c.mod) < n {
			c.mod = make([]byte, 0, n)
		}
		c.mod, err = r.str(c.mod[:0])
		c.modHigh = r.high
		return err
	case fModuleB64:
		var tmp []byte
		tmp, err = r.str(c.key[:0])
		c.key = tmp
		if err != nil {
			return err
		}
		c.mod = c.mod[:0]
		c.modHigh = true // binary, or text never checked byte by byte
		c.mod, err = base64.StdEncoding.AppendDecode(c.mod, tmp)
		if err != nil {
			return fmt.Errorf("%w: module_b64 is not standard base64: %w", ErrSignature, err)
		}
		return nil
	case fFormat:
		if err := optional(&s.format); err != nil {
			return err
		}
		switch s.format {
		case "", FormatStableHLO, FormatHLO, FormatMLIRBytecode:
			return nil
		}
		return fmt.Errorf("%w: module_format %q is not one of %q, %q, %q", ErrSignature, s.format, FormatStableHLO, FormatHLO, FormatMLIRBytecode)
	case fPlatform:
		return optional(&s.platform)
	case fPlatformVersion:
		return optional(&s.platformVersion)
	case fJaxlibVersion:
		return optional(&s.jaxlibVersion)
	case fJaxlibBuild:
		if err := optional(&s.jaxlibBuild); err != nil {
			return err
		}
		return checkJaxlibBuild(s.jaxlibBuild)
	case fCompileOptions:
		return optional(&s.compileOptions)
	case fCodec:
		return optional(&s.codec)
	case fFlags:
		if r.null() {
			return nil
		}
		list, err := r.strings(name)
		if err != nil {
			return err
		}
		s.flags, err = normalizeFlags(list)
		return err
	case fTopology:
		if r.null() {
			return nil
		}
		if r.peek() == '"' {
			var v string
			if err := optional(&v); err != nil {
				return err
			}
			s.topology = appendJSONString(nil, []byte(v))
			return nil
		}
		list, err := r.strings(name)
		if err != nil {
			return err
		}
		t := []byte{'['}
		for i, v := range list {
			if i > 0 {
				t = append(t, ',')
			}
			t = appendJSONString(t, []byte(v))
		}
		s.topology = append(t, ']')
		return nil
	case fExtra:
		if r.null() {
			return nil
		}
		raw, err := r.raw()
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return fmt.Errorf("%w: field \"extra\" is not valid JSON: %w", ErrSignature, err)
		}
		if !utf8.Valid(buf.Bytes()) {
			return fmt.Errorf("%w: field \"extra\" is not valid UTF-8", ErrSignature)
		}
		s.extra = buf.Bytes()
		return nil
	}
	return nil
}

// jaxlibBuildLen is the length of a jaxlib_build value: a SHA-256 in hex.
const jaxlibBuildLen = 64

// checkJaxlibBuild accepts "" (absent) or 64 lowercase hex digits, so that
// one build has one spelling and so one key.
func checkJaxlibBuild(v string) error {
	if v == "" {
		return nil
	}
	if len(v) != jaxlibBuildLen {
		return fmt.Errorf("%w: field \"jaxlib_build\" must be %d lowercase hex digits (a SHA-256), got %d characters", ErrSignature, jaxlibBuildLen, len(v))
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%w: field \"jaxlib_build\" must be %d lowercase hex digits (a SHA-256): byte %d is %q", ErrSignature, jaxlibBuildLen, i, c)
		}
	}
	return nil
}

// strings reads a JSON array of strings.
func (r *jreader) strings(name string) ([]string, error) {
	if r.peek() != '[' {
		return nil, r.errorf("field %q must be a list of strings", name)
	}
	r.i++
	var out []string
	r.ws()
	if r.peek() == ']' {
		r.i++
		return out, nil
	}
	for {
		r.ws()
		if r.peek() != '"' {
			return nil, r.errorf("field %q must be a list of strings", name)
		}
		v, err := r.str(nil)
		if err != nil {
			return nil, err
		}
		if r.high && !utf8.Valid(v) {
			return nil, fmt.Errorf("%w: field %q is not valid UTF-8", ErrSignature, name)
		}
		out = append(out, string(v))
		r.ws()
		switch r.peek() {
		case ',':
			r.i++
		case ']':
			r.i++
			return out, nil
		default:
			return nil, r.errorf("expected ',' or ']' in field %q", name)
		}
	}
}
