package wasmstop

import (
	"bytes"
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
)

// dispatchParts is a function laid out as Go's compiler does (dispatch.go):
// triangle(n) = n + (n-1) + ... + 1, with local 1 as $pc and local 2 as the
// sum. Region 0 jumps forward to region 2 when n is 0 (from inside an if)
// and else forward to region 1; region 1 adds n, decrements it and jumps
// back to region 0; region 2 returns the sum. Each jump is
// "i32.const K; local.set 1; br L"; the fields are the bytes between them,
// so that tests can vary one part.
type dispatchParts struct {
	blockType              byte   // of the dispatch blocks (0x40: empty)
	table                  []byte // br_table's immediates: count, labels, default
	toEnd, toOne, backZero []byte // the three jumps
}

func goStyleParts() dispatchParts {
	jump := func(k, label byte) []byte { return []byte{0x41, k, 0x21, 0x01, 0x0c, label} }
	return dispatchParts{
		blockType: 0x40,
		table:     []byte{0x03, 0x00, 0x01, 0x02, 0x00},
		toEnd:     jump(2, 3), // inside the if: if, block 1, block 2, loop
		toOne:     jump(1, 2), // block 1, block 2, loop
		backZero:  jump(0, 1), // block 2, loop
	}
}

// code returns the function's code (after its locals), with check after the
// loop's block type (nil: none).
func (p dispatchParts) code(check []byte) []byte {
	return cat(
		[]byte{0x03, 0x40}, check, // loop
		[]byte{0x02, p.blockType, 0x02, p.blockType, 0x02, p.blockType}, // blocks 2, 1, 0
		[]byte{0x20, 0x01, 0x0e}, p.table, // local.get $pc; br_table
		[]byte{0x0b},                                  // end of block 0: region 0
		[]byte{0x20, 0x00, 0x45, 0x04, 0x40}, p.toEnd, // if n == 0: to region 2
		[]byte{0x0b}, p.toOne, // end if; to region 1
		[]byte{0x0b}, // end of block 1: region 1
		[]byte{0x20, 0x02, 0x20, 0x00, 0x6a, 0x21, 0x02}, // sum += n
		[]byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x21, 0x00}, // n--
		p.backZero,               // back to region 0
		[]byte{0x0b},             // end of block 2: region 2
		[]byte{0x20, 0x02, 0x0f}, // return sum
		[]byte{0x0b, 0x00, 0x0b}, // end of loop; unreachable; end
	)
}

// dispatchModule exports the function as "triangle" and "spin", an
// endless dispatch loop: region 0 jumps forward to region 1, which jumps
// back to region 0.
func dispatchModule(p dispatchParts) []byte {
	jump := func(k, label byte) []byte { return []byte{0x41, k, 0x21, 0x00, 0x0c, label} }
	spin := cat(
		[]byte{0x03, 0x40, 0x02, 0x40, 0x02, 0x40, 0x20, 0x00, 0x0e, 0x02, 0x00, 0x01, 0x00, 0x0b},
		jump(1, 1), []byte{0x0b}, // region 0: on to region 1
		jump(0, 0), []byte{0x0b}, // region 1: back to region 0
		[]byte{0x0b},
	)
	return mod(
		sec(secType, vec(fn(1, 1), fn(0, 0))),
		sec(secFunction, vec(u32(0), u32(1))),
		memory1,
		sec(secExport, vec(export("triangle", 0, 0), export("spin", 0, 1))),
		sec(secCode, vec(body(2, p.code(nil)...), body(1, spin...))),
	)
}

// TestRetargetDispatch checks the rewrite byte for byte: the two forward
// jumps of the Go-style function go straight to their blocks, the backward
// one goes round the loop, and anything that is not exactly the pattern is
// left alone.
func TestRetargetDispatch(t *testing.T) {
	direct := goStyleParts()
	direct.toEnd = []byte{0x41, 2, 0x21, 0x01, 0x0c, 2}
	direct.toOne = []byte{0x41, 1, 0x21, 0x01, 0x0c, 0}
	tests := []struct {
		name     string
		in, want func() dispatchParts
	}{
		{"go style: forward jumps direct, the backward one kept", goStyleParts, func() dispatchParts { return direct }},
		{"a jump to its own region stays", func() dispatchParts {
			p := goStyleParts()
			p.table = []byte{0x03, 0x00, 0x00, 0x02, 0x00} // K=1 is region 0 too
			return p
		}, func() dispatchParts {
			p := direct
			p.table = []byte{0x03, 0x00, 0x00, 0x02, 0x00}
			p.toOne = goStyleParts().toOne
			return p
		}},
		{"the default label decides an out-of-range K", func() dispatchParts {
			p := goStyleParts()
			p.table = []byte{0x02, 0x00, 0x01, 0x02} // K=2 takes the default, region 2
			return p
		}, func() dispatchParts {
			p := direct
			p.table = []byte{0x02, 0x00, 0x01, 0x02}
			return p
		}},
	}
	// Jumps to region 1 that are not exactly the pattern stay round the
	// loop (the jump to region 2 is still rewritten); a loop that is not
	// exactly a dispatch loop is left as it is.
	for _, kept := range []struct {
		name    string
		mut     func(*dispatchParts)
		anyLoop bool // the mutation makes the loop no dispatch loop
	}{
		{"an instruction between set and br", func(p *dispatchParts) { p.toOne = []byte{0x41, 1, 0x21, 0x01, 0x01, 0x0c, 2} }, false},
		{"another local set", func(p *dispatchParts) { p.toOne = []byte{0x41, 1, 0x21, 0x02, 0x0c, 2} }, false},
		{"not a constant", func(p *dispatchParts) { p.toOne = []byte{0x20, 0x00, 0x21, 0x01, 0x0c, 2} }, false},
		{"dispatch blocks with a type", func(p *dispatchParts) { p.blockType = 0x7f }, true},
		{"a table that leaves the blocks", func(p *dispatchParts) { p.table = []byte{0x03, 0x00, 0x01, 0x03, 0x00} }, true},
	} {
		in := func() dispatchParts { p := goStyleParts(); kept.mut(&p); return p }
		want := func() dispatchParts {
			p := direct
			if kept.anyLoop {
				p = goStyleParts()
			}
			kept.mut(&p)
			return p
		}
		tests = append(tests, struct {
			name     string
			in, want func() dispatchParts
		}{kept.name + ": kept", in, want})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, want := tt.in(), tt.want()
			m := mod(sec(secType, vec(fn(1, 1))), sec(secFunction, vec(u32(0))), memory1,
				sec(secCode, vec(body(2, in.code(nil)...))))
			got, err := Instrument(m)
			if err != nil {
				t.Fatal(err)
			}
			wantCode := body(2, want.code(check(0))...)
			if !bytes.Contains(got, wantCode) {
				t.Fatalf("instrumented module %x\ndoes not hold the function %x", got, wantCode)
			}
		})
	}
}

// TestDispatchRewriteKeepsResultsAndStops runs the Go-style functions
// instrumented: triangle computes what it computes without instrumenting,
// and spin, whose only way back is round the loop, stops on the flag.
func TestDispatchRewriteKeepsResultsAndStops(t *testing.T) {
	ctx := context.Background()
	module := dispatchModule(goStyleParts())
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	plain, err := rt.Instantiate(ctx, module)
	if err != nil {
		t.Fatal(err)
	}
	m := instrumented(t, module)
	for _, n := range []uint64{0, 1, 2, 7, 1000, 100000} {
		want, err := plain.ExportedFunction("triangle").Call(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.ExportedFunction("triangle").Call(ctx, n)
		if err != nil || got[0] != want[0] || uint32(want[0]) != uint32(n*(n+1)/2) {
			t.Fatalf("triangle(%d) = %v, %v instrumented; %v plain, want %d", n, got, err, want, uint32(n*(n+1)/2))
		}
	}
	stopsOnFlag(t, m, "spin")
}
