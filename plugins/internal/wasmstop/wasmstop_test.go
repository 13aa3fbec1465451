package wasmstop

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/plugins/pluginstest"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// A tiny assembler for test modules.

func u32(v uint32) []byte { return appendU32(nil, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func sec(id byte, content ...[]byte) []byte {
	c := cat(content...)
	return cat([]byte{id}, u32(uint32(len(c))), c)
}

// vec2 is vec for a list whose last item is two entries (stopGlobal).
func vec2(items ...[]byte) []byte {
	return cat(append([][]byte{u32(uint32(len(items) + 1))}, items...)...)
}

func vec(items ...[]byte) []byte { return cat(append([][]byte{u32(uint32(len(items)))}, items...)...) }

func str(s string) []byte { return appendName(nil, s) }

func mod(sections ...[]byte) []byte { return cat(append([][]byte{header}, sections...)...) }

// fn is a function type with i32 params and results.
func fn(params, results int) []byte {
	p := bytes.Repeat([]byte{0x7f}, params)
	r := bytes.Repeat([]byte{0x7f}, results)
	return cat([]byte{0x60}, u32(uint32(params)), p, u32(uint32(results)), r)
}

// body is a function body with n i32 locals.
func body(locals uint32, code ...byte) []byte {
	var l []byte
	if locals == 0 {
		l = u32(0)
	} else {
		l = cat(u32(1), u32(locals), []byte{0x7f})
	}
	b := cat(l, code)
	return cat(u32(uint32(len(b))), b)
}

func export(name string, kind byte, idx uint32) []byte { return cat(str(name), []byte{kind}, u32(idx)) }

// check is the sequence Instrument inserts after a loop for stop index i
// (and tick index i+1).
func check(i uint32) []byte { return loopCheck(i, i+1) }

var (
	stopGlobal = []byte{0x7f, 0x01, 0x41, 0x00, 0x0b, 0x7f, 0x01, 0x41, 0x80, 0x20, 0x0b} // and the tick
	i32Global  = []byte{0x7f, 0x00, 0x41, 0x07, 0x0b}                                     // (i32) 7
	memory1    = sec(secMemory, vec([]byte{0x00, 0x01}))
)

// spinModule exports "spin" (an endless loop) and "count" (n) -> n, which
// loops n times with immediates full of 0x03 bytes.
func spinModule(extra ...[]byte) []byte {
	count := []byte{
		0x41, 0x03, 0x21, 0x03, // i32.const 3; local.set 3 (0x03 as immediates)
		0x44, 3, 3, 3, 3, 3, 3, 3, 3, 0x1a, // f64.const; drop
		0x02, 0x40, // block
		0x03, 0x40, // loop
		0x20, 0x00, 0x45, 0x0d, 0x01, // local.get 0; i32.eqz; br_if 1
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x21, 0x00, // n--
		0x20, 0x01, 0x41, 0x01, 0x6a, 0x21, 0x01, // r++
		0x20, 0x03, 0x0e, 0x02, 0x00, 0x00, 0x00, // local.get 3; br_table 0 0 0
		0x0b, 0x0b,
		0x20, 0x01, 0x0b,
	}
	spin := []byte{0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b}
	return mod(cat(
		sec(secType, vec(fn(0, 0), fn(1, 1))),
		sec(secFunction, vec(u32(0), u32(1))),
		memory1,
		sec(secExport, vec(export("spin", 0, 0), export("count", 0, 1), export("memory", 2, 0))),
		sec(secCode, vec(body(0, spin...), body(3, count...))),
		sec(secCustom, str("keep"), []byte{1, 2, 3}),
		cat(extra...),
	))
}

func TestInstrumentGolden(t *testing.T) {
	loopBody := func(stop uint32, instrumented bool) []byte {
		c := []byte{0x41, 0x03, 0x1a, 0x03, 0x40}
		if instrumented {
			c = cat(check(stop), c, check(stop)) // at the entry and after the loop
		}
		return body(0, append(c, 0x0b, 0x0b)...)
	}
	types := sec(secType, vec(fn(0, 0)))
	funcs := sec(secFunction, vec(u32(0)))
	custom := sec(secCustom, str("keep"), []byte{0xff, 0x03, 0x03})
	tests := []struct {
		name     string
		in, want []byte
	}{
		{"only a memory", mod(memory1),
			mod(memory1, sec(secGlobal, vec2(stopGlobal)), sec(secExport, vec(export(ExportName, 3, 0))))},
		{"no global section",
			mod(types, funcs, memory1, custom, sec(secCode, vec(loopBody(0, false)))),
			mod(types, funcs, memory1, custom, sec(secGlobal, vec2(stopGlobal)), sec(secExport, vec(export(ExportName, 3, 0))),
				sec(secCode, vec(loopBody(0, true))))},
		{"existing globals and exports",
			mod(types, funcs, memory1, sec(secGlobal, vec(i32Global, i32Global)), sec(secExport, vec(export("f", 0, 0))),
				sec(secCode, vec(loopBody(0, false))), custom),
			mod(types, funcs, memory1, sec(secGlobal, vec2(i32Global, i32Global, stopGlobal)),
				sec(secExport, vec(export("f", 0, 0), export(ExportName, 3, 2))),
				sec(secCode, vec(loopBody(2, true))), custom)},
		{"imported globals and memory",
			mod(types, sec(secImport, vec(cat(str("m"), str("g"), []byte{3, 0x7f, 0}), cat(str("m"), str("mem"), []byte{2, 0, 1}))), funcs,
				sec(secGlobal, vec(i32Global)), sec(secCode, vec(loopBody(0, false)))),
			mod(types, sec(secImport, vec(cat(str("m"), str("g"), []byte{3, 0x7f, 0}), cat(str("m"), str("mem"), []byte{2, 0, 1}))), funcs,
				sec(secGlobal, vec2(i32Global, stopGlobal)), sec(secExport, vec(export(ExportName, 3, 2))),
				sec(secCode, vec(loopBody(2, true))))},
		{"multi-value block type and nested loops",
			mod(sec(secType, vec(fn(0, 0), fn(0, 1))), funcs, memory1, sec(secCode, vec(body(0,
				0x03, 0x01, 0x03, 0x40, 0x0b, 0x41, 0x00, 0x0b, 0x1a, 0x0b)))),
			mod(sec(secType, vec(fn(0, 0), fn(0, 1))), funcs, memory1, sec(secGlobal, vec2(stopGlobal)),
				sec(secExport, vec(export(ExportName, 3, 0))), sec(secCode, vec(body(0, cat(
					[]byte{0x03, 0x01}, check(0), []byte{0x03, 0x40}, check(0), []byte{0x0b, 0x41, 0x00, 0x0b, 0x1a, 0x0b})...))))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Instrument(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("got  %x\nwant %x", got, tt.want)
			}
			compile(t, tt.in)
			compile(t, got)
		})
	}
}

func compile(t testing.TB, wasm []byte) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, wasm); err != nil {
		t.Fatalf("compile: %v", err)
	}
}

// instrumented instruments module and instantiates it on a runtime without
// close-on-context-done (the flag is the only way to stop it), closed when
// the test ends.
func instrumented(t *testing.T, module []byte) api.Module {
	t.Helper()
	ctx := context.Background()
	out, err := Instrument(module)
	if err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { rt.Close(ctx) })
	m, err := rt.Instantiate(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestInstrumentedCodeRunsAndStops(t *testing.T) {
	ctx := context.Background()
	m := instrumented(t, spinModule())
	if r, err := m.ExportedFunction("count").Call(ctx, 1000); err != nil || r[0] != 1000 {
		t.Fatalf("count(1000) = %v, %v", r, err)
	}
	stopsOnFlag(t, m, "spin")
	// The flag is read when the countdown runs out: within YieldEvery checks.
	if _, err := m.ExportedFunction("count").Call(ctx, 2*YieldEvery); err == nil {
		t.Fatal("count ran with the flag set")
	}
}

// stopsOnFlag calls m's function fn, which runs for ever, and checks that
// it is still running after a while and traps once the stop flag is set.
func stopsOnFlag(t *testing.T, m api.Module, fn string) {
	t.Helper()
	flag, ok := m.ExportedGlobal(ExportName).(api.MutableGlobal)
	if !ok {
		t.Fatal("stop global is not exported as a mutable global")
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.ExportedFunction(fn).Call(context.Background())
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("%s returned before the flag was set: %v", fn, err)
	default:
	}
	flag.Set(1)
	wantTrap(t, fn, done)
}

// TestStopsBeforeMemoryGrow: a set flag traps at the next memory.grow, not
// YieldEvery checks later. One grow can take long (the host copies the
// memory into a larger buffer): a plugin growing memory in a loop ran
// thousands of grows, seconds and gigabytes, past its deadline.
func TestStopsBeforeMemoryGrow(t *testing.T) {
	ctx := context.Background()
	grow := []byte{0x41, 0x01, 0x40, 0x00, 0x0b} // i32.const 1; memory.grow (the old size in pages)
	m := instrumented(t, mod(cat(
		sec(secType, vec(fn(0, 1))),
		sec(secFunction, vec(u32(0))),
		memory1,
		sec(secExport, vec(export("grow", 0, 0))),
		sec(secCode, vec(body(0, grow...))),
	)))
	if r, err := m.ExportedFunction("grow").Call(ctx); err != nil || r[0] != 1 {
		t.Fatalf("grow() = %v, %v; want 1 (the old size)", r, err)
	}
	m.ExportedGlobal(ExportName).(api.MutableGlobal).Set(1)
	if _, err := m.ExportedFunction("grow").Call(ctx); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("grow() with the flag set: %v; want an unreachable trap before the grow", err)
	}
	if pages := m.Memory().Size() / 65536; pages != 2 {
		t.Fatalf("memory is %d pages; want 2 (the stopped call grew nothing)", pages)
	}
}

// TestStopsBranchingRecursion: code without a single loop can still run
// for ever (fork(n) calls fork(n-1) twice: 2^n calls); the check at every
// function entry stops it.
func TestStopsBranchingRecursion(t *testing.T) {
	ctx := context.Background()
	fork := []byte{
		0x20, 0x00, 0x45, 0x04, 0x40, 0x0f, 0x0b, // if n == 0 { return }
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x00, // fork(n-1)
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x00, // fork(n-1)
		0x0b,
	}
	m := instrumented(t, mod(sec(secType, vec(fn(1, 0))), sec(secFunction, vec(u32(0))), memory1,
		sec(secExport, vec(export("fork", 0, 0))), sec(secCode, vec(body(0, fork...)))))
	if _, err := m.ExportedFunction("fork").Call(ctx, 4); err != nil {
		t.Fatalf("fork(4): %v", err)
	}
	flag := m.ExportedGlobal(ExportName).(api.MutableGlobal)
	time.AfterFunc(20*time.Millisecond, func() { flag.Set(1) })
	done := make(chan error, 1)
	go func() {
		_, err := m.ExportedFunction("fork").Call(ctx, 60)
		done <- err
	}()
	wantTrap(t, "fork(60)", done)
}

// wantTrap waits for the call that reports on done to end in the trap the
// stop flag causes.
func wantTrap(t *testing.T, call string, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Fatalf("%s: %v; want an unreachable trap", call, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not stop after the flag was set", call)
	}
}

// TestStopWithOneProcAndGC: with a single P and a garbage collection
// pending, a timer goroutine still gets to set the flag of a spinning
// instance, because instrumented code yields to Go every YieldEvery loop
// iterations (compiled wasm cannot be preempted otherwise).
func TestStopWithOneProcAndGC(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ctx := context.Background()
	m := instrumented(t, spinModule())
	flag := m.ExportedGlobal(ExportName).(api.MutableGlobal)
	time.AfterFunc(50*time.Millisecond, func() { flag.Set(1) })
	gcDone := make(chan struct{})
	go func() {
		time.Sleep(10 * time.Millisecond)
		runtime.GC() // needs the spinning goroutine to stop the world
		close(gcDone)
	}()
	if _, err := m.ExportedFunction("spin").Call(ctx); err == nil {
		t.Fatal("spin returned without an error")
	}
	<-gcDone
}

func TestInstrumentFeatures(t *testing.T) {
	types := sec(secType, vec(fn(0, 0)))
	funcs := sec(secFunction, vec(u32(0)))
	code := func(c ...byte) []byte { return sec(secCode, vec(body(1, append(c, 0x0b)...))) }
	tests := []struct {
		name   string
		code   []byte
		checks int // one per loop, and one at the entry unless the body opens with a loop
	}{
		{"sign extension", []byte{0x03, 0x40, 0x41, 0x03, 0xc0, 0xc4 - 4, 0x1a, 0x0b}, 1},
		{"saturating trunc", []byte{0x43, 0, 0, 0x40, 0x40, 0xfc, 0x00, 0x1a, 0x03, 0x40, 0x0b}, 2},
		{"bulk memory", []byte{0x03, 0x40, 0x41, 0x00, 0x41, 0x03, 0x41, 0x03, 0xfc, 0x0b, 0x00,
			0x41, 0x00, 0x41, 0x03, 0x41, 0x03, 0xfc, 0x0a, 0x00, 0x00, 0x0b}, 1},
		{"reference types", []byte{0xd0, 0x70, 0xd1, 0x1a, 0xd2, 0x00, 0x1a, 0x03, 0x40,
			0x41, 0x03, 0x41, 0x03, 0x41, 0x01, 0x1c, 0x01, 0x7f, 0x1a, 0x0b}, 2},
		{"simd", []byte{
			0xfd, 0x0c, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, // v128.const
			0xfd, 0x0c, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
			0xfd, 0x0d, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, // i8x16.shuffle
			0xfd, 0x15, 0x03, 0x1a, // i8x16.extract_lane_s 3; drop
			0x41, 0x00, 0xfd, 0x0c, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
			0xfd, 0x54, 0x00, 0x03, 0x03, // v128.load8_lane align 0 offset 3 lane 3
			0x1a,
			0x03, 0x40, 0x41, 0x00, 0xfd, 0x00, 0x04, 0x03, 0xfd, 0x62, 0x1a, 0x0b, // loop v128.load popcnt
		}, 2},
		{"loop in if and block", []byte{0x41, 0x01, 0x04, 0x40, 0x03, 0x40, 0x0b, 0x05, 0x02, 0x40, 0x03, 0x40, 0x0b, 0x0b, 0x0b}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := mod(types, funcs, sec(secTable, vec([]byte{0x70, 0x00, 0x01})), memory1,
				sec(secElement, vec([]byte{0x01, 0x00, 0x01, 0x00})), // passive elem (func 0), for ref.func
				code(tt.code...), sec(secData, vec(cat([]byte{0x01}, u32(4), []byte{1, 2, 3, 4}))))
			compile(t, in)
			out, err := Instrument(in)
			if err != nil {
				t.Fatal(err)
			}
			compile(t, out)
			if n := bytes.Count(out, check(0)); n != tt.checks {
				t.Fatalf("%d checks inserted; want %d", n, tt.checks)
			}
		})
	}
}

func TestInstrumentErrors(t *testing.T) {
	types := sec(secType, vec(fn(0, 0)))
	funcs := sec(secFunction, vec(u32(0)))
	code := func(c ...byte) []byte { return mod(types, funcs, memory1, sec(secCode, vec(body(0, c...)))) }
	valid := spinModule()
	tests := []struct {
		name string
		in   []byte
		kind error  // nil: any error
		text string // in the message
	}{
		{"no magic", []byte("not wasm at all"), ErrMalformed, "magic"},
		{"version 2", []byte{0, 'a', 's', 'm', 2, 0, 0, 0}, ErrMalformed, "version"},
		{"sections out of order", mod(funcs, types), ErrMalformed, "out of order"},
		{"repeated section", mod(types, types), ErrMalformed, "out of order"},
		{"unknown section", mod(sec(14)), ErrMalformed, "unknown section"},
		{"section past end", valid[:len(valid)-1], ErrMalformed, "past the end"},
		{"section size not consumed", mod(sec(secFunction, vec(u32(0)), []byte{0})), ErrMalformed, "size says"},
		{"overlong LEB128", mod(sec(secFunction, []byte{0x81, 0x80, 0x80, 0x80, 0x80, 0x00})), ErrMalformed, "LEB128"},
		{"body without end", code(0x01), ErrMalformed, "unexpected end"},
		{"bodies without declarations", mod(types, memory1, sec(secCode, vec(body(0, 0x0b)))), ErrMalformed, "bodies"},
		{"export name taken", mod(memory1, sec(secGlobal, vec(i32Global)), sec(secExport, vec(export(ExportName, 3, 0)))), nil, "already exports"},
		{"no memory", mod(types, funcs, sec(secCode, vec(body(0, 0x0b)))), ErrUnsupported, "no memory"},
		{"global.get past the globals", code(0x23, 0x00, 0x1a, 0x0b), ErrMalformed, "global index 0"},
		{"global.set past the globals", mod(types, funcs, memory1, sec(secGlobal, vec(i32Global)),
			sec(secCode, vec(body(0, 0x41, 0x00, 0x24, 0x01, 0x0b)))), ErrMalformed, "global index 1"},
		{"threads", code(0xfe, 0x03, 0x00, 0x0b), ErrUnsupported, "opcode 0xfe at byte 28"},
		{"exceptions", code(0x06, 0x40, 0x0b, 0x0b), ErrUnsupported, "opcode 0x06 at byte 28"},
		{"tail call", code(0x12, 0x00, 0x0b), ErrUnsupported, "opcode 0x12 at byte 28"},
		{"gc", code(0xfb, 0x00, 0x0b), ErrUnsupported, "opcode 0xfb"},
		{"relaxed simd", code(0xfd, 0x80, 0x02, 0x0b), ErrUnsupported, "opcode 0xfd 256"},
		{"reserved simd", code(0xfd, 0x9a, 0x01, 0x0b), ErrUnsupported, "opcode 0xfd 154"},
		{"unknown 0xfc", code(0xfc, 0x12, 0x0b), ErrUnsupported, "opcode 0xfc 18"},
		{"start function", mod(types, funcs, memory1, sec(secStart, u32(0)), sec(secCode, vec(body(0, 0x0b)))), ErrUnsupported, "start section"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Instrument(tt.in)
			if err == nil {
				t.Fatalf("accepted: %x", out)
			}
			if tt.kind != nil && !errors.Is(err, tt.kind) {
				t.Errorf("err = %v; want %v", err, tt.kind)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("err = %v; want it to contain %q", err, tt.text)
			}
		})
	}
}

// TestBadGlobalIndexCannotLoad: a module whose code names the index the
// stop flag would get is invalid, so wazero refuses it as it is; Instrument
// refuses it too (its output would be valid and could clear the flag).
func TestBadGlobalIndexCannotLoad(t *testing.T) {
	in := mod(sec(secType, vec(fn(0, 0))), sec(secFunction, vec(u32(0))), memory1, sec(secGlobal, vec(i32Global)),
		sec(secCode, vec(body(0, 0x41, 0x00, 0x24, 0x01, 0x0b)))) // global.set 1
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, in); err == nil {
		t.Fatal("wazero compiled a module setting a global it does not have")
	}
	if _, err := Instrument(in); err == nil {
		t.Fatal("Instrument accepted a module setting a global it does not have")
	}
}

func TestTruncatedAndCorrupted(t *testing.T) {
	valid := spinModule()
	for i := range valid {
		out, err := Instrument(valid[:i])
		if err == nil {
			compile(t, out) // a prefix that ends between sections is a valid module
		}
	}
	for i := range valid {
		b := bytes.Clone(valid)
		for _, v := range []byte{0x00, 0x03, 0x80, 0xff} {
			b[i] = v
			_, _ = Instrument(b) // must not panic
		}
	}
}

func TestDeterministicAndInputUnchanged(t *testing.T) {
	in := spinModule()
	orig := bytes.Clone(in)
	a, err := Instrument(in)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Instrument(in)
	if !bytes.Equal(a, b) || !bytes.Equal(in, orig) {
		t.Fatal("output differs between runs or input was modified")
	}
	if !bytes.HasSuffix(a, sec(secCustom, str("keep"), []byte{1, 2, 3})) {
		t.Fatal("custom section not kept byte-identical")
	}
}

// repoModules are the .wasm files of the repository (built-ins, test
// plugins, and the examples' build output if present).
func repoModules(t testing.TB) []string {
	var files []string
	for _, g := range []string{"../../builtin/*/*.wasm", "../../testdata/*.wasm", "../../examples/*/*.wasm", "../../examples/*/*/*.wasm"} {
		m, _ := filepath.Glob(g)
		files = append(files, m...)
	}
	if len(files) < 4 {
		t.Fatalf("found only %v", files)
	}
	return files
}

// TestRepoModules instruments every plugin in the repository and runs it on
// wazero without close-on-context-done: it starts, describes itself, and
// its stop flag exists.
func TestRepoModules(t *testing.T) {
	files := repoModules(t)
	ctx := context.Background()
	cache, err := wazero.NewCompilationCacheWithDir(pluginstest.CacheDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close(ctx)
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Instrument(in)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) <= len(in) {
				t.Fatalf("output %d bytes, input %d", len(out), len(in))
			}
			m, err := rt.InstantiateWithConfig(ctx, out, wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize"))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			if _, ok := m.ExportedGlobal(ExportName).(api.MutableGlobal); !ok {
				t.Fatal("no mutable stop global")
			}
			r, err := m.ExportedFunction("describe").Call(ctx)
			if err != nil {
				t.Fatal(err)
			}
			desc, ok := m.Memory().Read(uint32(r[0]>>32), uint32(r[0]))
			if !ok || !bytes.Contains(desc, []byte(`"abi"`)) {
				t.Fatalf("describe = %q", desc)
			}
		})
	}
}

// smallNumbers reports whether wasm holds no LEB128 of three or more bytes
// anywhere (so every count it declares is below 2^14). wazero allocates a
// declared count before reading the entries, which makes inputs like a type
// section claiming 2^31 parameters take gigabytes before they fail; such
// inputs are still fuzzed for panics, just not compiled.
func smallNumbers(wasm []byte) bool {
	for i := 0; i+2 < len(wasm); i++ {
		if wasm[i]&wasm[i+1]&0x80 != 0 {
			return false
		}
	}
	return true
}

// FuzzInstrument: Instrument never panics, and when wazero accepts the
// input and Instrument accepts it too, wazero accepts the output.
func FuzzInstrument(f *testing.F) {
	for _, file := range repoModules(f) {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(spinModule())
	f.Add(dispatchModule(goStyleParts()))
	f.Add(mod(memory1))
	f.Add(mod(memory1, sec(secGlobal, vec(i32Global)), sec(secExport, vec(export("g", 3, 0)))))
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Instrument(in)
		if err != nil || len(in) > 64<<10 || !smallNumbers(in) {
			return // big inputs (the seeds) are compiled by TestRepoModules
		}
		cm, err := rt.CompileModule(ctx, in)
		if err != nil {
			return
		}
		cm.Close(ctx)
		cm, err = rt.CompileModule(ctx, out)
		if err != nil {
			t.Fatalf("input compiles but its instrumented output does not: %v", err)
		}
		cm.Close(ctx)
	})
}

func TestOpensWithLoop(t *testing.T) {
	tests := []struct {
		name string
		code []byte
		want bool
	}{
		{"loop", []byte{0x03, 0x40, 0x0b, 0x0b}, true},
		{"block then loop (Go's functions)", []byte{0x02, 0x40, 0x03, 0x40, 0x0b, 0x0b, 0x0b}, true},
		{"blocks with value and index types then loop", []byte{0x02, 0x7f, 0x02, 0x01, 0x03, 0x40}, true},
		{"an instruction first", []byte{0x41, 0x00, 0x03, 0x40}, false},
		{"block then an instruction", []byte{0x02, 0x40, 0x41, 0x00, 0x03, 0x40}, false},
		{"if then loop", []byte{0x04, 0x40, 0x03, 0x40}, false},
		{"empty", nil, false},
		{"truncated block type", []byte{0x02, 0x80}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := opensWithLoop(tt.code); got != tt.want {
				t.Fatalf("opensWithLoop(%x) = %v; want %v", tt.code, got, tt.want)
			}
		})
	}
}
