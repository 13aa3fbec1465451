// Command cmdline is an example third-party cachesvc plugin: it keys the
// output of a command-line compiler (a C compiler, a shader compiler, ...)
// from the tool, its version, its arguments and the digests of its inputs.
//
// Signature (backend "cmdline"):
//
//	{"backend": "cmdline", "tool": "gcc", "tool_version": "13.2.0",
//	 "args": ["-O2", "-c", "src/foo.c", "-o", "/tmp/build-81/foo.o"],
//	 "inputs": {"src/foo.c": "sha256:…"}, "env": {"LANG": "C"}}
//
// Canonicalization: the value of -o (an output path, different on every
// build) is dropped; env is sorted and only variables in keepEnv are kept;
// everything else stays in the key verbatim. See README.md.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/cachesvc/cachesvc/plugins/sdk"
)

// keepEnv lists the environment variables that change a compiler's output.
var keepEnv = map[string]bool{"LANG": true, "LC_ALL": true, "SOURCE_DATE_EPOCH": true}

func init() {
	sdk.Register(sdk.Description{
		Name:     "cmdline",
		Version:  "0.1.0", // bump whenever canonical bytes change for some input
		Backends: []string{"cmdline"},
		Reads:    []string{"backend", "tool", "tool_version", "args", "inputs", "env"},
	}, canonicalize)
	sdk.RegisterNormalize(normalize) // optional: lets `cachesvc plugin check` test idempotence
}

type signature struct {
	Backend     string            `json:"backend"`
	Tool        string            `json:"tool"`
	ToolVersion string            `json:"tool_version"`
	Args        []string          `json:"args,omitempty"`
	Inputs      map[string]string `json:"inputs,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
}

// parse decodes and validates a signature and drops what does not matter.
func parse(in []byte) (signature, error) {
	var s signature
	dec := json.NewDecoder(strings.NewReader(string(in)))
	dec.DisallowUnknownFields() // an unknown field might matter: refuse, don't guess
	if err := dec.Decode(&s); err != nil {
		return s, fmt.Errorf("decode signature: %w", err)
	}
	if s.Tool == "" || s.ToolVersion == "" {
		return s, errors.New("tool and tool_version are required")
	}
	var args []string
	for i := 0; i < len(s.Args); i++ {
		if s.Args[i] == "-o" && i+1 < len(s.Args) {
			i++ // the output path does not change the output
			continue
		}
		args = append(args, s.Args[i])
	}
	s.Args = args
	for k := range s.Env {
		if !keepEnv[k] {
			delete(s.Env, k)
		}
	}
	return s, nil
}

// normalize returns the signature with what does not matter removed; its key
// is the same as the input's.
func normalize(in []byte) ([]byte, error) {
	s, err := parse(in)
	if err != nil {
		return nil, err
	}
	return json.Marshal(s) // encoding/json sorts map keys
}

func canonicalize(in []byte) (sdk.Result, error) {
	s, err := parse(in)
	if err != nil {
		return sdk.Result{}, err
	}
	args := s.Args
	var env []string
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	inputs := make([]string, 0, len(s.Inputs))
	for path, digest := range s.Inputs {
		inputs = append(inputs, path+"="+digest)
	}
	sort.Strings(inputs)

	// Frame each part so that no two different signatures concatenate to the
	// same bytes: a length-prefixed record per field.
	var canon []byte
	field := func(name string, values ...string) {
		canon = fmt.Appendf(canon, "%s %d\n", name, len(values))
		for _, v := range values {
			canon = fmt.Appendf(canon, "%d:%s\n", len(v), v)
		}
	}
	field("tool", s.Tool, s.ToolVersion)
	field("args", args...)
	field("env", env...)
	field("inputs", inputs...)
	return sdk.Result{
		Canonical: canon,
		Components: map[string]string{
			"tool":   s.Tool + " " + s.ToolVersion,
			"args":   digest(args),
			"env":    digest(env),
			"inputs": digest(inputs),
		},
		DisplayName: s.Tool + " " + strings.Join(args, " "),
	}, nil
}

func digest(parts []string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}

func main() {}
