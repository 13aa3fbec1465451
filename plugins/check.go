package plugins

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Probe is one signature a conformance check feeds a plugin.
type Probe struct {
	// Name says where the probe came from (a corpus file, "probe:<backend>").
	Name string
	// Signature is the JSON signature.
	Signature []byte
}

// CheckResult is the outcome of one conformance check.
type CheckResult struct {
	// Name says what was checked and on which probe.
	Name string `json:"name"`
	// OK is true when the check passed.
	OK bool `json:"ok"`
	// Skipped is true when the check could not run (for example no
	// normalize export); a skipped check does not fail the report.
	Skipped bool `json:"skipped,omitempty"`
	// Detail explains a failure, or summarizes a pass.
	Detail string `json:"detail,omitempty"`
}

// CheckReport is the outcome of Check.
type CheckReport struct {
	// Info is what the plugin's describe said.
	Info Info `json:"plugin"`
	// Results lists every check in the order run.
	Results []CheckResult `json:"checks"`
	// OK is true when no check failed (skipped checks do not fail).
	OK bool `json:"ok"`
	// Slowest is the longest single canonicalize call seen.
	Slowest time.Duration `json:"slowest_ns"`
}

// DefaultProbes returns one minimal signature per backend of info, used when
// no corpus is given: {"backend": B}.
func DefaultProbes(info Info) []Probe {
	var out []Probe
	for _, b := range info.Backends {
		sig, _ := json.Marshal(map[string]string{"backend": b})
		out = append(out, Probe{Name: "probe:" + b, Signature: sig})
	}
	return out
}

// CheckLoadsBeside names the check that a plugin claims no name or backend
// of the plugins the host already holds (serve would refuse to load it).
const CheckLoadsBeside = "loads beside the loaded plugins"

// ModuleField returns the signature field and value that carry a bare
// module file's bytes: "module" and the text when they are UTF-8,
// "module_b64" and their standard base64 otherwise (MLIR bytecode, which
// the xla schema takes only so). A JSON string cannot hold bytes that are
// not UTF-8: encoding/json replaces each with U+FFFD, which would change
// the module and give modules differing only there one key.
func ModuleField(module []byte) (field, value string) {
	if utf8.Valid(module) {
		return "module", string(module)
	}
	return "module_b64", base64.StdEncoding.EncodeToString(module)
}

// LoadCorpus reads probes from dir: every *.json file is a signature used as
// is; every other regular file is a bare module wrapped as
// {"backend": <first backend>, "module": <text>} (or "module_b64" for
// bytes that are not text, see ModuleField; when the plugin reads that
// field), with extra fields merged in (for example platform and versions).
// Hidden files and *.md are skipped.
// Files are sorted by name; subdirectories are walked.
func LoadCorpus(dir string, info Info, extra map[string]any) ([]Probe, error) {
	var out []Probe
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") || strings.HasSuffix(d.Name(), ".md") {
			return nil // documentation (SOURCES.md, README.md) is not a module
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, ".json") {
			out = append(out, Probe{Name: path, Signature: b})
			return nil
		}
		field, value := ModuleField(b)
		if !slices.Contains(info.Reads, field) || len(info.Backends) == 0 {
			return nil
		}
		sig := map[string]any{}
		maps.Copy(sig, extra)
		sig["backend"], sig[field] = info.Backends[0], value
		enc, err := json.Marshal(sig)
		if err != nil {
			return err
		}
		out = append(out, Probe{Name: path, Signature: enc})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load corpus %s: %w", dir, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Check verifies that wasm is a conforming plugin (see ABI.md): describe is
// valid; canonicalize is deterministic over repeated calls, across calls with
// other inputs in between and on fresh instances; it is idempotent (through
// normalize, when exported); every call stays within the host's limits; it
// can be loaded beside the plugins h holds (load the built-ins first to
// learn whether serve would refuse it for a name or backend they claim).
// The plugin is compiled but not registered. probes nil means
// DefaultProbes.
//
// # Errors
//
// Only a module that cannot be loaded at all is an error (the report then
// says nothing); failing checks are in the report.
func (h *Host) Check(ctx context.Context, source string, wasm []byte, probes []Probe) (CheckReport, error) {
	p, err := h.Compile(ctx, source, wasm)
	if err != nil {
		return CheckReport{}, err
	}
	defer p.Close(ctx)
	rep := CheckReport{Info: p.Info()}
	add := func(r CheckResult) { rep.Results = append(rep.Results, r) }
	add(CheckResult{Name: "describe", OK: true, Detail: fmt.Sprintf("%s, backends %s, reads %s, interrupt %s",
		p.ID(), strings.Join(rep.Info.Backends, ","), strings.Join(rep.Info.Reads, ","), rep.Info.Interrupt)})
	h.mu.RLock()
	other, err := conflict(h.byName, h.byBackend, p)
	h.mu.RUnlock()
	switch {
	case other != nil && other.digest == p.digest:
		// The very module h holds (checking a built-in itself): no clash.
	case err != nil:
		add(CheckResult{Name: CheckLoadsBeside,
			Detail: err.Error() + "; serve would refuse to load it: give it a name and backends of its own"})
	case len(h.byName) > 0:
		add(CheckResult{Name: CheckLoadsBeside, OK: true})
	}
	if probes == nil {
		probes = DefaultProbes(rep.Info)
	}
	type outcome struct {
		res Result
		err error
	}
	call := func(fresh bool, sig []byte) outcome {
		start := time.Now()
		var o outcome
		if fresh {
			o.res, o.err = p.CanonicalizeFresh(ctx, sig)
		} else {
			o.res, o.err = p.Canonicalize(ctx, sig)
		}
		if d := time.Since(start); d > rep.Slowest {
			rep.Slowest = d
		}
		return o
	}
	same := func(a, b outcome) string {
		switch {
		case (a.err == nil) != (b.err == nil):
			return fmt.Sprintf("one call failed and the other did not (%v / %v)", a.err, b.err)
		case a.err != nil && a.err.Error() != b.err.Error():
			return fmt.Sprintf("different errors: %q vs %q", a.err, b.err)
		case a.err != nil:
			return ""
		case !bytes.Equal(a.res.Canonical, b.res.Canonical):
			return fmt.Sprintf("canonical bytes differ (%d vs %d bytes, first difference at byte %d)",
				len(a.res.Canonical), len(b.res.Canonical), firstDiff(a.res.Canonical, b.res.Canonical))
		case !maps.Equal(a.res.Components, b.res.Components):
			return "components differ"
		case a.res.DisplayName != b.res.DisplayName:
			return fmt.Sprintf("display names differ: %q vs %q", a.res.DisplayName, b.res.DisplayName)
		}
		return ""
	}
	first := make([]outcome, len(probes))
	for i, pr := range probes {
		o := call(false, pr.Signature)
		first[i] = o
		switch {
		case o.err == nil:
			add(CheckResult{Name: "canonicalize " + pr.Name, OK: true,
				Detail: fmt.Sprintf("%d canonical bytes, %d components, display name %q", len(o.res.Canonical), len(o.res.Components), o.res.DisplayName)})
		case errors.Is(o.err, ErrPlugin):
			add(CheckResult{Name: "canonicalize " + pr.Name, OK: true, Detail: "rejected: " + o.err.Error()})
		default:
			add(CheckResult{Name: "canonicalize " + pr.Name, Detail: "failed within limits: " + o.err.Error()})
		}
	}
	for i, pr := range probes {
		if d := same(first[i], call(false, pr.Signature)); d != "" {
			add(CheckResult{Name: "deterministic (repeat, after other inputs) " + pr.Name, Detail: d})
		} else {
			add(CheckResult{Name: "deterministic (repeat, after other inputs) " + pr.Name, OK: true})
		}
		if d := same(first[i], call(true, pr.Signature)); d != "" {
			add(CheckResult{Name: "deterministic (fresh instance) " + pr.Name, Detail: d})
		} else {
			add(CheckResult{Name: "deterministic (fresh instance) " + pr.Name, OK: true})
		}
		if first[i].err != nil {
			continue
		}
		add(p.checkIdempotent(ctx, pr, first[i].res))
	}
	rep.OK = true
	for _, r := range rep.Results {
		if !r.OK && !r.Skipped {
			rep.OK = false
		}
	}
	return rep, nil
}

// checkIdempotent verifies canonicalize(normalize(s)) == canonicalize(s) and
// normalize(normalize(s)) == normalize(s).
func (p *Plugin) checkIdempotent(ctx context.Context, pr Probe, want Result) CheckResult {
	name := "idempotent " + pr.Name
	n1, err := p.Normalize(ctx, pr.Signature)
	if errors.Is(err, ErrUnsupported) {
		return CheckResult{Name: name, Skipped: true, Detail: "plugin has no normalize export"}
	}
	if err != nil {
		return CheckResult{Name: name, Detail: "normalize: " + err.Error()}
	}
	got, err := p.Canonicalize(ctx, n1)
	if err != nil {
		return CheckResult{Name: name, Detail: "canonicalize(normalize(s)): " + err.Error()}
	}
	if !bytes.Equal(got.Canonical, want.Canonical) {
		return CheckResult{Name: name, Detail: fmt.Sprintf("canonicalize(normalize(s)) differs from canonicalize(s) at byte %d",
			firstDiff(got.Canonical, want.Canonical))}
	}
	n2, err := p.Normalize(ctx, n1)
	if err != nil {
		return CheckResult{Name: name, Detail: "normalize(normalize(s)): " + err.Error()}
	}
	if !bytes.Equal(n1, n2) {
		return CheckResult{Name: name, Detail: fmt.Sprintf("normalize is not idempotent: differs at byte %d", firstDiff(n1, n2))}
	}
	return CheckResult{Name: name, OK: true}
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
