// Package wasmstop rewrites a WebAssembly module so that its host can stop
// it, within a few thousand loop iterations or calls, by setting one
// exported global.
//
// Instrument appends two mutable i32 globals to the module: the stop flag
// (initially 0, exported as ExportName) and an unexported countdown. At the
// start of every function body (unless it opens with a loop) and right
// after every loop instruction it inserts
//
//	global.get $tick
//	i32.eqz
//	if
//	  i32.const YieldEvery
//	  global.set $tick
//	  i32.const 0
//	  memory.grow
//	  drop
//	  global.get $stop
//	  if
//	    unreachable
//	  end
//	else
//	  global.get $tick
//	  i32.const 1
//	  i32.sub
//	  global.set $tick
//	end
//
// so a host that sets the flag to a non-zero value makes the running code
// trap within YieldEvery checks. Loops alone are not enough: a function
// that calls itself twice per level runs for exponential time without one.
// Before every memory.grow of the module's own code it inserts
//
//	global.get $stop
//	if
//	  unreachable
//	end
//
// because one grow can take long (the host copies the memory): code that
// grows memory in a loop would otherwise run YieldEvery grows past its stop.
//
// The "memory.grow 0" (which changes nothing) is there because setting the
// flag takes a Go goroutine, and Go cannot preempt a goroutine running
// compiled wasm: code that never leaves wasm would hold its thread and
// block every stop-the-world (the garbage collector's) and, with one P, the
// timer that wants to stop it. wazero implements memory.grow as a call into
// Go, where the goroutine can be preempted. The fast path is one load, one
// store and one well-predicted branch, because it runs very often: Go's
// compiler turns every taken branch into an iteration of a function-wide
// loop. For the same reason Instrument sends the jumps forward in such a
// loop straight to their destination (dispatch.go), which takes them out
// of the loop, and its check, altogether.
//
// Every existing index (functions, globals, types, tables, memories) is
// unchanged and every byte outside the global, export and code sections is
// copied as is. The output is a pure function of the input.
//
// The module cannot see the flag: Instrument refuses a module whose code
// names a global index beyond its own globals (such a reference, invalid in
// the original, would name the flag once it exists).
package wasmstop

import (
	"errors"
	"fmt"
)

// ExportName is the export under which Instrument exposes the stop global.
const ExportName = "cachesvc:stop"

// YieldEvery is how many checks (loop iterations and calls) instrumented code runs between
// two calls into the host (see the package documentation).
const YieldEvery = 4096

// ErrUnsupported is wrapped by Instrument's error when the module uses a
// feature the instrumenter does not decode (threads, exceptions, tail calls,
// GC, multiple memories, relaxed SIMD, a start function). The module may still
// be valid; a host can run it under another stop mechanism.
var ErrUnsupported = errors.New("unsupported by wasmstop")

// ErrMalformed is wrapped by Instrument's error when the input is not a
// well-formed module (bad magic or version, sections out of order, sizes
// that do not add up, truncated LEB128, invalid references to the stop
// global's index).
var ErrMalformed = errors.New("malformed module")

// Instrument returns wasm with the stop global, its export and the
// checks added (see the package documentation). It never modifies wasm.
//
// # Errors
//
// ErrMalformed (wrapped) if wasm is not a well-formed module; ErrUnsupported
// (wrapped) if it uses a feature outside the core spec, sign extension,
// bulk memory, reference types, multi-value and SIMD, has a start
// function (it would run before the host can arm the flag) or has no
// memory (to yield through); an error if
// the module already exports ExportName. Messages name the byte offset.
func Instrument(wasm []byte) ([]byte, error) {
	sections, err := split(wasm)
	if err != nil {
		return nil, err
	}
	var (
		importedGlobals, definedGlobals uint32
		memories                        uint32
		functions, bodies               uint32
		global, export, code            *section
	)
	for i := range sections {
		s := &sections[i]
		switch s.id {
		case secImport:
			if importedGlobals, memories, err = scanImports(s); err != nil {
				return nil, err
			}
		case secMemory:
			r := reader{b: s.content, base: s.start}
			n, err := r.u32()
			if err != nil {
				return nil, err
			}
			memories += n
		case secFunction:
			r := reader{b: s.content, base: s.start}
			if functions, err = r.u32(); err != nil {
				return nil, err
			}
			for range functions {
				if _, err := r.u32(); err != nil {
					return nil, err
				}
			}
			if err := r.done("function section"); err != nil {
				return nil, err
			}
		case secGlobal:
			global = s
		case secExport:
			export = s
		case secCode:
			code = s
		case secStart:
			return nil, fmt.Errorf("%w: start section at byte %d: a start function runs before the stop flag can be armed", ErrUnsupported, s.start)
		case secTag:
			return nil, fmt.Errorf("%w: tag section (exception handling) at byte %d", ErrUnsupported, s.start)
		}
	}
	// Globals are numbered imports first, then definitions; the new one
	// comes last, after every existing index.
	var globalEntries []byte // the global section after its count
	if global != nil {
		r := reader{b: global.content, base: global.start}
		if definedGlobals, err = r.u32(); err != nil {
			return nil, err
		}
		entries := r.off
		for range definedGlobals {
			if _, err := r.valtype(); err != nil {
				return nil, err
			}
			if _, err := r.mutability(); err != nil {
				return nil, err
			}
			// Constant expressions may only read globals defined before,
			// but checking against the original count suffices here.
			if err := scanExpr(&r, importedGlobals+definedGlobals, nil); err != nil {
				return nil, err
			}
		}
		if err := r.done("global section"); err != nil {
			return nil, err
		}
		globalEntries = global.content[entries:]
	}
	if memories == 0 {
		return nil, fmt.Errorf("%w: the module has no memory to yield through", ErrUnsupported)
	}
	total := uint64(importedGlobals) + uint64(definedGlobals)
	if total >= 1<<32-2 {
		return nil, fmt.Errorf("%w: too many globals", ErrMalformed)
	}
	stop, tick := uint32(total), uint32(total+1)

	var exportEntries []byte
	var exports uint32
	if export != nil {
		r := reader{b: export.content, base: export.start}
		if exports, err = r.u32(); err != nil {
			return nil, err
		}
		entries := r.off
		for range exports {
			at := r.pos()
			name, err := r.name()
			if err != nil {
				return nil, err
			}
			if name == ExportName {
				return nil, fmt.Errorf("module already exports %q (byte %d)", ExportName, at)
			}
			kind, err := r.byte()
			if err != nil {
				return nil, err
			}
			if kind > 3 {
				return nil, fmt.Errorf("%w: export kind 0x%02x at byte %d", ErrUnsupported, kind, r.pos()-1)
			}
			if _, err := r.u32(); err != nil {
				return nil, err
			}
		}
		if err := r.done("export section"); err != nil {
			return nil, err
		}
		exportEntries = export.content[entries:]
		if exports == 1<<32-1 {
			return nil, fmt.Errorf("%w: too many exports", ErrMalformed)
		}
	}

	var newCode []byte
	if code != nil {
		if newCode, bodies, err = instrumentCode(code, loopCheck(stop, tick), growCheck(stop), uint32(total)); err != nil {
			return nil, err
		}
	}
	if bodies != functions {
		return nil, fmt.Errorf("%w: %d function declarations but %d bodies", ErrMalformed, functions, bodies)
	}

	newGlobal := appendU32(nil, definedGlobals+2)
	newGlobal = append(newGlobal, globalEntries...)
	newGlobal = append(newGlobal, 0x7f, 0x01, 0x41, 0x00, 0x0b) // $stop: (mut i32) (i32.const 0)
	newGlobal = append(newGlobal, 0x7f, 0x01, 0x41)             // $tick: (mut i32) (i32.const YieldEvery)
	newGlobal = appendS32(newGlobal, YieldEvery)
	newGlobal = append(newGlobal, 0x0b)
	newExport := appendU32(nil, exports+1)
	newExport = append(newExport, exportEntries...)
	newExport = appendName(newExport, ExportName)
	newExport = append(newExport, 0x03) // global
	newExport = appendU32(newExport, stop)

	out := make([]byte, 0, len(wasm)+len(wasm)/16+64)
	out = append(out, header...)
	placedGlobal, placedExport := false, false
	for _, s := range sections {
		if s.id != secCustom {
			if !placedGlobal && order[s.id] > order[secGlobal] {
				out = appendSection(out, secGlobal, newGlobal)
				placedGlobal = true
			}
			if !placedExport && order[s.id] > order[secExport] {
				out = appendSection(out, secExport, newExport)
				placedExport = true
			}
		}
		switch s.id {
		case secGlobal:
			out = appendSection(out, secGlobal, newGlobal)
			placedGlobal = true
		case secExport:
			out = appendSection(out, secExport, newExport)
			placedExport = true
		case secCode:
			out = appendSection(out, secCode, newCode)
		default:
			out = appendSection(out, s.id, s.content)
		}
	}
	if !placedGlobal {
		out = appendSection(out, secGlobal, newGlobal)
	}
	if !placedExport {
		out = appendSection(out, secExport, newExport)
	}
	return out, nil
}
