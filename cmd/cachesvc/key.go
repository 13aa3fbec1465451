package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/cachesvc/cachesvc/plugins"
)

// moduleFlags describe a bare module file as an xla signature.
type moduleFlags struct {
	platform, platformVersion, jaxlibVersion, moduleFormat string
	compileOptions, topology, codec                        string
	xlaFlags                                               stringList
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// Type names the value in help: one XLA flag per use.
func (l *stringList) Type() string { return "flag" }

func newModuleFlags(fs *flag.FlagSet) *moduleFlags {
	m := &moduleFlags{}
	fs.StringVar(&m.platform, "platform", "", "bare module: signature field platform (e.g. cpu, cuda, tpu)")
	fs.StringVar(&m.platformVersion, "platform-version", "", "bare module: signature field platform_version")
	fs.StringVar(&m.jaxlibVersion, "jaxlib-version", "", "bare module: signature field jaxlib_version")
	fs.StringVar(&m.moduleFormat, "module-format", "", "bare module: module_format (stablehlo or hlo; default detected)")
	fs.StringVar(&m.compileOptions, "compile-options", "", "bare module: compile_options (digest or base64)")
	fs.StringVar(&m.topology, "topology", "", "bare module: topology (fingerprint or device kinds)")
	fs.StringVar(&m.codec, "codec", "", "bare module: codec")
	fs.Var(&m.xlaFlags, "xla-flag", "bare module: one XLA flag (repeatable)")
	return m
}

// fields returns the non-empty signature fields the flags set.
func (m *moduleFlags) fields() map[string]any {
	out := map[string]any{}
	for k, v := range map[string]string{"platform": m.platform, "platform_version": m.platformVersion,
		"jaxlib_version": m.jaxlibVersion, "module_format": m.moduleFormat, "compile_options": m.compileOptions,
		"topology": m.topology, "codec": m.codec} {
		if v != "" {
			out[k] = v
		}
	}
	if len(m.xlaFlags) > 0 {
		out["xla_flags"] = []string(m.xlaFlags)
	}
	return out
}

// keyOutput is what `cachesvc key --json` prints (one JSON object per line
// and input).
type keyOutput struct {
	File          string            `json:"file,omitempty"`
	Key           string            `json:"key"`
	Backend       string            `json:"backend"`
	Plugin        string            `json:"plugin"`
	DisplayName   string            `json:"display_name"`
	Components    map[string]string `json:"components"`
	CanonicalSize int               `json:"canonical_size"`
}

// runKey prints the key of a signature (or bare module), offline, through the
// same keying code as the server.
func runKey(ctx context.Context, args []string, sio stdio) error {
	var o pluginOptions
	var backend string
	var jsonOut bool
	fs := newFlagSet("key FILE...", "Print the cache key, display name and components of each signature FILE (JSON) or bare module FILE with --platform, --jaxlib-version, ...; '-' reads stdin. Offline: the same plugins and code path as the server.", sio)
	addPluginFlags(fs, &o)
	fs.StringVar(&backend, "backend", "", "backend for a bare module, or to add to a signature lacking one (default xla for bare modules)")
	fs.BoolVar(&jsonOut, "json", false, "print one JSON object per line and FILE")
	mf := newModuleFlags(fs)
	pos, err := parseInterspersed(fs, args, sio)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("want a FILE (or several, or - for stdin)")
	}
	sigs := make([][]byte, len(pos))
	for i, name := range pos {
		in, err := readKeyInput(name, sio.Stdin, o.MaxSignature)
		if err != nil {
			return err
		}
		if sigs[i], err = buildSignature(name, in, backend, mf.fields()); err != nil {
			return err
		}
	}
	if o.CacheDir == "" {
		o.CacheDir = defaultWasmCache()
	}
	k, h, err := openKeyer(ctx, o, slog.New(slog.DiscardHandler), false, false)
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	enc := json.NewEncoder(sio.Stdout)
	for i, sig := range sigs {
		res, err := k.Key(ctx, sig)
		if err != nil {
			if len(sigs) > 1 {
				return fmt.Errorf("%s: %w", pos[i], err)
			}
			return err
		}
		out := keyOutput{Key: res.Key.String(), Backend: res.Backend, Plugin: res.Plugin, DisplayName: res.DisplayName,
			Components: res.Components, CanonicalSize: res.CanonicalSize}
		if len(sigs) > 1 {
			out.File = pos[i]
		}
		if jsonOut {
			if err := enc.Encode(out); err != nil {
				return err
			}
			continue
		}
		printKey(sio, out)
	}
	return nil
}

// readKeyInput reads the signature or module file name ("-": stdin), at
// most max bytes: more is refused as it is read, saying so, rather than
// read whole into memory (or, from stdin, cut short and then reported with
// the size of what was read).
func readKeyInput(name string, stdin io.Reader, max int64) ([]byte, error) {
	r, label := stdin, "stdin"
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("read signature: %w", err)
		}
		defer f.Close()
		r, label = f, name
	}
	in, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("read signature: %w", err)
	}
	if int64(len(in)) > max {
		return nil, fmt.Errorf("%s: more than %d bytes, over --max-signature-size %s: raise it, or key a smaller signature", label, max, formatSize(max))
	}
	return in, nil
}

// printKey prints one key as aligned text.
func printKey(sio stdio, out keyOutput) {
	if out.File != "" {
		fmt.Fprintf(sio.Stdout, "== %s\n", out.File)
	}
	fmt.Fprintf(sio.Stdout, "key           %s\nbackend       %s\nplugin        %s\ndisplay name  %s\ncanonical     %d bytes\n",
		out.Key, out.Backend, out.Plugin, out.DisplayName, out.CanonicalSize)
	names := make([]string, 0, len(out.Components))
	for n := range out.Components {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 0 {
		fmt.Fprintln(sio.Stdout, "components")
	}
	for _, n := range names {
		fmt.Fprintf(sio.Stdout, "  %-22s %s\n", n, out.Components[n])
	}
}

// buildSignature returns in, read from the file name ("-": stdin), as a
// signature: a JSON object is used as is (backend added if missing and
// given); anything else is a bare module wrapped with the module flags
// (as module_b64 when it is not text: MLIR bytecode).
// Input that starts with '{' is taken for JSON even when it does not parse
// (no StableHLO, HLO or MLIR bytecode module starts so): wrapped as a
// module it would be keyed by the plugin, whose "missing field" error
// hides the typo.
func buildSignature(name string, in []byte, backend string, fields map[string]any) ([]byte, error) {
	trimmed := bytes.TrimSpace(in)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(in, &obj); err != nil {
			return nil, jsonInputError(name, in, err)
		}
		if _, ok := obj["backend"]; ok || backend == "" {
			if len(fields) > 0 {
				return nil, usagef("module flags apply to bare modules, and %s is a JSON signature: put them in the signature, or unset %s", name, givenModuleFlags(fields))
			}
			return in, nil
		}
		b, _ := json.Marshal(backend)
		obj["backend"] = b
		return marshalSignature(obj)
	}
	if backend == "" {
		backend = "xla"
	}
	sig := map[string]any{}
	for k, v := range fields {
		sig[k] = v
	}
	field, value := plugins.ModuleField(in)
	sig["backend"], sig[field] = backend, value
	return marshalSignature(sig)
}

// givenModuleFlags names the module flags that set fields, each with its
// environment variable (where a launcher may have set it unseen).
func givenModuleFlags(fields map[string]any) string {
	var names []string
	for k := range fields {
		flagName := strings.ReplaceAll(k, "_", "-")
		if k == "xla_flags" {
			flagName = "xla-flag"
		}
		names = append(names, fmt.Sprintf("--%s (or %s)", flagName, envName(flagName)))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// jsonInputError reports a signature file that looks like JSON but does not
// parse, as name:line:column (of the byte the parser stopped at) when the
// error has a position, so an editor can jump to it.
func jsonInputError(name string, in []byte, err error) error {
	if name == "-" {
		name = "stdin"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) && se.Offset > 0 && se.Offset <= int64(len(in)) {
		at := int(se.Offset) - 1 // Offset counts the byte the parser stopped at
		line := 1 + bytes.Count(in[:at], []byte("\n"))
		col := at - bytes.LastIndexByte(in[:at], '\n')
		return fmt.Errorf("%s:%d:%d: not valid JSON (input that starts with '{' is read as a JSON signature, not a bare module): %w", name, line, col, err)
	}
	return fmt.Errorf("%s: not valid JSON (input that starts with '{' is read as a JSON signature, not a bare module): %w", name, err)
}

// marshalSignature encodes a signature as the Python client does: without
// json.Marshal's HTML escaping, which would turn every '<' and '>' of a
// module (tensor<...>) into a six-byte \u escape that the plugin decodes
// one at a time.
func marshalSignature(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
