// Command gensig writes an `xla` signature JSON for the lookup benchmarks:
// either around a module file (-module) or around a generated StableHLO module
// of a given size (-size), using the same generator as the plugin benchmarks.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cachesvc/cachesvc/plugins/builtin/xla/xlacanon"
)

func main() {
	module := flag.String("module", "", "module file (StableHLO or HLO text) to wrap")
	size := flag.String("size", "", "generate a StableHLO module of about this size (e.g. 10MiB)")
	out := flag.String("o", "-", "output file (- for stdout)")
	flag.Parse()
	var text []byte
	switch {
	case *module != "" && *size == "":
		b, err := os.ReadFile(*module)
		if err != nil {
			fatalf("read module: %v", err)
		}
		text = b
	case *size != "" && *module == "":
		n, err := parseSize(*size)
		if err != nil {
			fatalf("-size: %v", err)
		}
		text = xlacanon.GenerateModule(n)
	default:
		fatalf("give exactly one of -module FILE or -size N")
	}
	sig, err := json.Marshal(map[string]any{
		"backend":        "xla",
		"module":         string(text),
		"platform":       "cpu",
		"jaxlib_version": "bench",
		"xla_flags":      []string{"--xla_cpu_enable_fast_math=false"},
	})
	if err != nil {
		fatalf("encode signature: %v", err)
	}
	if *out == "-" {
		_, err = os.Stdout.Write(sig)
	} else {
		err = os.WriteFile(*out, sig, 0o644)
	}
	if err != nil {
		fatalf("write signature: %v", err)
	}
}

func parseSize(s string) (int, error) {
	mult := 1
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("want a positive size such as 10MiB, got %q", s)
	}
	return n * mult, nil
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gensig: "+format+"\n", args...)
	os.Exit(2)
}
