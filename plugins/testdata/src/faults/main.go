// Command faults is a test plugin that misbehaves on request: the signature's
// "mode" field selects ok, error, loop, grow, trap, exit, nilderef, big or
// spin (a long but finite busy loop).
package main

import (
	"bytes"
	"errors"
	"os"

	"github.com/cachesvc/cachesvc/plugins/sdk"
)

var (
	hoard [][]byte
	sink  int
)

func init() {
	sdk.Register(sdk.Description{Name: "faults", Version: "1", Backends: []string{"faults"}, Reads: []string{"mode"}}, canonicalize)
}

func mode(in []byte, m string) bool { return bytes.Contains(in, []byte(`"mode":"`+m+`"`)) }

func canonicalize(in []byte) (sdk.Result, error) {
	switch {
	case mode(in, "error"):
		return sdk.Result{}, errors.New("mode error: this signature is rejected on purpose")
	case mode(in, "loop"):
		n := 0
		for {
			n++
		}
	case mode(in, "grow"):
		for {
			hoard = append(hoard, make([]byte, 1<<20))
		}
	case mode(in, "trap"):
		panic("mode trap: deliberate panic")
	case mode(in, "exit"):
		os.Exit(3)
	case mode(in, "nilderef"):
		var p *[4]byte
		return sdk.Result{Canonical: p[:]}, nil
	case mode(in, "spin"):
		for i := 0; i < 500_000_000; i++ {
			sink += i ^ sink>>3
		}
	case mode(in, "big"):
		return sdk.Result{Canonical: make([]byte, 100<<20)}, nil
	}
	return sdk.Result{Canonical: in, Components: map[string]string{"size": "n"}, DisplayName: "ok"}, nil
}

func main() {}
