package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"
)

// describe starts the first instance, calls describe and parses it.
func (p *Plugin) describe(ctx context.Context) (Info, error) {
	v, err := p.with(ctx, false, func(ctx context.Context, inst *instance) (any, error) {
		if err := inst.describe.CallWithStack(ctx, inst.stack[:]); err != nil {
			return nil, p.classify(ctx, inst.stderr, fmt.Errorf("call describe: %w", err))
		}
		raw, err := p.read(inst, inst.stack[0], 64<<10)
		if err != nil {
			return nil, err
		}
		return parseDescribe(p.source, raw)
	})
	info, _ := v.(Info)
	return info, err
}

// read returns a view of the packed (ptr<<32|len) region, at most max bytes.
func (p *Plugin) read(inst *instance, packed uint64, max int64) ([]byte, error) {
	ptr, n := uint32(packed>>32), uint32(packed)
	if int64(n) > max {
		return nil, p.fail(ErrOutput, "output of %d bytes exceeds the limit of %d bytes", n, max)
	}
	b, ok := inst.mod.Memory().Read(ptr, n)
	if !ok {
		return nil, p.fail(ErrOutput, "output region [%d, +%d) is outside linear memory", ptr, n)
	}
	return b, nil
}

// invoke writes signature into the instance, calls fn, decodes the result
// JSON into out and returns a copy of the <field>_ptr/<field>_len region it
// names (nil if it names none).
func (p *Plugin) invoke(ctx context.Context, inst *instance, fn api.Function, signature []byte, field string, out *resultJSON) ([]byte, error) {
	cfg := p.host.cfg
	if int64(len(signature)) > cfg.MaxInputBytes {
		return nil, p.fail(ErrInputTooLarge, "signature of %d bytes exceeds the plugin input limit of %d bytes", len(signature), cfg.MaxInputBytes)
	}
	// ABI.md: a buffer from alloc(n) serves every later input of at most n
	// bytes until the next alloc, so most calls skip alloc.
	if !inst.hasBuf || uint32(len(signature)) > inst.bufCap {
		want := max(uint32(len(signature)), 4096)
		inst.stack[0] = uint64(want)
		if err := inst.alloc.CallWithStack(ctx, inst.stack[:]); err != nil {
			return nil, p.classify(ctx, inst.stderr, fmt.Errorf("call alloc: %w", err))
		}
		inst.bufPtr, inst.bufCap, inst.hasBuf = uint32(inst.stack[0]), want, true
	}
	ptr := inst.bufPtr
	if !inst.mod.Memory().Write(ptr, signature) {
		return nil, p.fail(ErrOutput, "alloc(%d) returned %d, outside linear memory", inst.bufCap, ptr)
	}
	inst.stack[0], inst.stack[1] = uint64(ptr), uint64(len(signature))
	if err := fn.CallWithStack(ctx, inst.stack[:]); err != nil {
		return nil, p.classify(ctx, inst.stderr, fmt.Errorf("call %s: %w", fn.Definition().ExportNames()[0], err))
	}
	raw, err := p.read(inst, inst.stack[0], cfg.MaxOutputBytes)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, p.fail(ErrOutput, "result is not valid JSON: %v", err)
	}
	rptr, rlen, found, err := out.region(field)
	if err != nil {
		return nil, p.fail(ErrOutput, "result JSON: %v", err)
	}
	if !found {
		return nil, nil
	}
	if int64(rlen)+int64(len(raw)) > cfg.MaxOutputBytes {
		return nil, p.fail(ErrOutput, "output of %d bytes exceeds the limit of %d bytes", int64(rlen)+int64(len(raw)), cfg.MaxOutputBytes)
	}
	view, ok := inst.mod.Memory().Read(rptr, rlen)
	if !ok {
		return nil, p.fail(ErrOutput, "%s region [%d, +%d) is outside linear memory", field, rptr, rlen)
	}
	return bytes.Clone(view), nil
}

// resultJSON is any result JSON of ABI.md (canonicalize or normalize).
type resultJSON struct {
	Error         *string           `json:"error"`
	Unsupported   bool              `json:"unsupported"`
	CanonicalPtr  *uint32           `json:"canonical_ptr"`
	CanonicalLen  *uint32           `json:"canonical_len"`
	NormalizedPtr *uint32           `json:"normalized_ptr"`
	NormalizedLen *uint32           `json:"normalized_len"`
	Components    map[string]string `json:"components"`
	DisplayName   string            `json:"display_name"`
}

// region returns the <field>_ptr/<field>_len region; found is false if
// neither is present.
func (r *resultJSON) region(field string) (ptr, n uint32, found bool, err error) {
	pp, pl := r.CanonicalPtr, r.CanonicalLen
	if field == "normalized" {
		pp, pl = r.NormalizedPtr, r.NormalizedLen
	}
	if pp == nil && pl == nil {
		return 0, 0, false, nil
	}
	if pp == nil || pl == nil {
		return 0, 0, false, fmt.Errorf("%s_ptr and %s_len must come together", field, field)
	}
	return *pp, *pl, true, nil
}

func (p *Plugin) canonicalize(ctx context.Context, inst *instance, signature []byte) (Result, error) {
	var r resultJSON
	canonical, err := p.invoke(ctx, inst, inst.canonicalize, signature, "canonical", &r)
	if err != nil {
		return Result{}, err
	}
	if r.Error != nil {
		return Result{}, &Error{Plugin: p.info.ID, Kind: ErrPlugin, Message: printable(boundMessage(*r.Error))}
	}
	if r.CanonicalLen == nil || canonical == nil {
		return Result{}, p.fail(ErrOutput, "result has neither canonical_ptr/canonical_len nor error")
	}
	if len(r.Components) > MaxComponents {
		return Result{}, p.fail(ErrOutput, "%d components exceed the limit of %d", len(r.Components), MaxComponents)
	}
	for k, v := range r.Components {
		if k == "" || len(k) > MaxComponentKeyBytes || len(v) > MaxComponentValueBytes {
			return Result{}, p.fail(ErrOutput, "component %.40q: names must be 1..%d bytes and values at most %d bytes",
				k, MaxComponentKeyBytes, MaxComponentValueBytes)
		}
	}
	if len(r.DisplayName) > MaxDisplayNameBytes {
		return Result{}, p.fail(ErrOutput, "display name of %d bytes exceeds the limit of %d", len(r.DisplayName), MaxDisplayNameBytes)
	}
	if r.Components == nil {
		r.Components = map[string]string{}
	}
	return Result{Canonical: canonical, Components: r.Components, DisplayName: printable(r.DisplayName)}, nil
}

// printable returns s with each control character (ESC, NUL, CR ...) and
// each byte that is not UTF-8 replaced by U+FFFD: a plugin's message and
// display name reach terminals (key, plugin check), logs and headers, where
// such bytes would be interpreted rather than shown.
func printable(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			return ' ' // a message over several lines stays readable on one
		case unicode.IsControl(r):
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// boundMessage keeps a plugin's own message readable and bounded.
func boundMessage(s string) string {
	const max = 1024
	s = strings.TrimSpace(s)
	if len(s) > max {
		s = s[:max]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	if s == "" {
		s = "plugin rejected the signature without a message"
	}
	return s
}
