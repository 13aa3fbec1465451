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
//
// The "memory.grow 0" (which changes nothing) is there because setting the
// flag takes a Go goroutine, and Go cannot preempt a goroutine running
// compiled wasm: code that never leaves wasm would hold its thread and
// block every stop-the-world (the garbage collector's) and, with one P, the
// timer that wants to stop it. wazero implements memory.grow as a call into
// Go, where the goroutine can be preempted. The fast path is one load, one
// store and one well-predicted branch, because it runs very often: Go's
// compiler turns every taken branch into an iteration of a function-wide
// loop.
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
	"encoding/binary"
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

// Section IDs of the core spec.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// order is the position of each known non-custom section in a module.
var order = map[byte]int{
	secType: 1, secImport: 2, secFunction: 3, secTable: 4, secMemory: 5,
	secGlobal: 6, secExport: 7, secStart: 8, secElement: 9, secDataCount: 10,
	secCode: 11, secData: 12,
}

var header = []byte{0, 'a', 's', 'm', 1, 0, 0, 0}

// section is one section of the input: its ID and its contents (without
// the ID and size), as a window of the input.
type section struct {
	id      byte
	start   int // offset of the contents in the input
	content []byte
}

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
		if newCode, bodies, err = instrumentCode(code, loopCheck(stop, tick), uint32(total)); err != nil {
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

// split checks the header and the section framing and order.
func split(wasm []byte) ([]section, error) {
	if len(wasm) < len(header) || string(wasm[:4]) != string(header[:4]) {
		return nil, fmt.Errorf("%w: no wasm magic number", ErrMalformed)
	}
	if string(wasm[4:8]) != string(header[4:8]) {
		return nil, fmt.Errorf("%w: binary format version %x, want 1", ErrMalformed, wasm[4:8])
	}
	r := reader{b: wasm, off: len(header)}
	var sections []section
	last := 0
	for r.off < len(r.b) {
		at := r.off
		id, _ := r.byte()
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		if uint64(size) > uint64(len(r.b)-r.off) {
			return nil, fmt.Errorf("%w: section %d at byte %d: size %d runs past the end", ErrMalformed, id, at, size)
		}
		s := section{id: id, start: r.off, content: r.b[r.off : r.off+int(size)]}
		r.off += int(size)
		switch {
		case id == secCustom:
			cr := reader{b: s.content, base: s.start}
			if _, err := cr.name(); err != nil {
				return nil, fmt.Errorf("custom section at byte %d: %w", at, err)
			}
		case id == secTag:
			if last >= order[secGlobal] {
				return nil, fmt.Errorf("%w: section %d at byte %d out of order", ErrMalformed, id, at)
			}
		case order[id] == 0:
			return nil, fmt.Errorf("%w: unknown section id %d at byte %d", ErrMalformed, id, at)
		default:
			if order[id] <= last {
				return nil, fmt.Errorf("%w: section %d at byte %d out of order or repeated", ErrMalformed, id, at)
			}
			last = order[id]
		}
		sections = append(sections, s)
	}
	return sections, nil
}

// loopCheck returns the code Instrument inserts at a function's entry and
// after each loop, for the stop and countdown globals with the given
// indices. Only the countdown is read on the fast path (one load, one
// store, one branch: it runs on every taken branch of Go code); the stop
// flag is read when the countdown runs out, so a set flag traps within
// YieldEvery checks, right after the yield to Go.
func loopCheck(stop, tick uint32) []byte {
	b := appendU32([]byte{0x23}, tick)                //   global.get $tick
	b = append(b, 0x45, 0x04, 0x40, 0x41)             //   i32.eqz; if; i32.const
	b = appendS32(b, YieldEvery)                      //     YieldEvery
	b = appendU32(append(b, 0x24), tick)              //     global.set $tick
	b = append(b, 0x41, 0x00, 0x40, 0x00, 0x1a, 0x23) //     memory.grow 0; drop; global.get
	b = appendU32(b, stop)                            //     $stop
	b = append(b, 0x04, 0x40, 0x00, 0x0b, 0x05)       //     if unreachable end; else
	b = appendU32(append(b, 0x23), tick)              //     global.get $tick
	b = append(b, 0x41, 0x01, 0x6b, 0x24)             //     i32.const 1; i32.sub; global.set
	b = appendU32(b, tick)                            //     $tick
	return append(b, 0x0b)                            //   end
}

// scanImports returns the number of imported globals and memories.
func scanImports(s *section) (globals, memories uint32, err error) {
	r := reader{b: s.content, base: s.start}
	n, err := r.u32()
	if err != nil {
		return 0, 0, err
	}
	for range n {
		if _, err := r.name(); err != nil {
			return 0, 0, err
		}
		if _, err := r.name(); err != nil {
			return 0, 0, err
		}
		kind, err := r.byte()
		if err != nil {
			return 0, 0, err
		}
		switch kind {
		case 0x00: // function: type index
			_, err = r.u32()
		case 0x01: // table: reftype, limits
			if _, err = r.reftype(); err == nil {
				err = r.limits()
			}
		case 0x02: // memory: limits
			err = r.limits()
			memories++
		case 0x03: // global: valtype, mutability
			if _, err = r.valtype(); err == nil {
				_, err = r.mutability()
			}
			globals++
		case 0x04:
			err = fmt.Errorf("%w: tag import (exception handling) at byte %d", ErrUnsupported, r.pos()-1)
		default:
			err = fmt.Errorf("%w: import kind 0x%02x at byte %d", ErrMalformed, kind, r.pos()-1)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	return globals, memories, r.done("import section")
}

// instrumentCode rewrites the code section's contents, inserting check at the entry and after
// each loop; it returns them and the number of bodies.
func instrumentCode(s *section, check []byte, globals uint32) ([]byte, uint32, error) {
	r := reader{b: s.content, base: s.start}
	n, err := r.u32()
	if err != nil {
		return nil, 0, err
	}
	out := appendU32(make([]byte, 0, len(s.content)+len(s.content)/16), n)
	var body []byte
	for range n {
		at := r.pos()
		size, err := r.u32()
		if err != nil {
			return nil, 0, err
		}
		if uint64(size) > uint64(len(r.b)-r.off) {
			return nil, 0, fmt.Errorf("%w: function body at byte %d: size %d runs past the section", ErrMalformed, at, size)
		}
		br := reader{b: r.b[r.off : r.off+int(size)], base: r.base + r.off}
		r.off += int(size)
		locals, err := br.u32()
		if err != nil {
			return nil, 0, err
		}
		for range locals {
			if _, err := br.u32(); err != nil {
				return nil, 0, err
			}
			if _, err := br.valtype(); err != nil {
				return nil, 0, err
			}
		}
		body = append(body[:0], br.b[:br.off]...)
		var loops []int // offsets in br.b right after each loop's block type
		if err := scanExpr(&br, globals, &loops); err != nil {
			return nil, 0, err
		}
		if err := br.done("function body"); err != nil {
			return nil, 0, err
		}
		// The check also opens every function: code without loops can
		// still run for ever by recursion that branches (f calls f twice).
		// A body that opens with a loop (after blocks, which do nothing)
		// runs the loop's check at once: Go's compiler starts every
		// function that way, so the check would run twice per call.
		prev := len(body)
		if !opensWithLoop(br.b[prev:]) {
			body = append(body, check...)
		}
		for _, l := range loops {
			body = append(body, br.b[prev:l]...)
			body = append(body, check...)
			prev = l
		}
		body = append(body, br.b[prev:]...)
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if err := r.done("code section"); err != nil {
		return nil, 0, err
	}
	return out, n, nil
}

// opensWithLoop reports whether expr (a validated function body's code)
// starts with zero or more block instructions and then a loop.
func opensWithLoop(expr []byte) bool {
	r := reader{b: expr}
	for r.off < len(r.b) && r.b[r.off] == 0x02 {
		r.off++
		if r.blocktype() != nil {
			return false
		}
	}
	return r.off < len(r.b) && r.b[r.off] == 0x03
}

// scanExpr decodes instructions up to and including the end that closes
// depth 0 (a function body or a constant expression). It checks that global
// indices are below globals and, if loops is not nil, records the offset
// right after each loop's block type.
func scanExpr(r *reader, globals uint32, loops *[]int) error {
	depth := 0
	for {
		at := r.pos()
		op, err := r.byte()
		if err != nil {
			return err
		}
		switch {
		case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
			if err := r.blocktype(); err != nil {
				return err
			}
			depth++
			if op == 0x03 && loops != nil {
				*loops = append(*loops, r.off)
			}
		case op == 0x0b: // end
			if depth == 0 {
				return nil
			}
			depth--
		case op == 0x00, op == 0x01, op == 0x05, op == 0x0f, op == 0x1a, op == 0x1b, op == 0xd1,
			op >= 0x45 && op <= 0xc4:
			// no immediates
		case op == 0x0c, op == 0x0d, // br, br_if
			op == 0x10,               // call
			op >= 0x20 && op <= 0x22, // local.get/set/tee
			op == 0x25, op == 0x26,   // table.get/set
			op == 0xd2: // ref.func
			if _, err := r.u32(); err != nil {
				return err
			}
		case op == 0x23 || op == 0x24: // global.get/set
			idx, err := r.u32()
			if err != nil {
				return err
			}
			if idx >= globals {
				return fmt.Errorf("%w: global index %d at byte %d is out of range (%d globals)", ErrMalformed, idx, at, globals)
			}
		case op == 0x0e: // br_table
			n, err := r.u32()
			if err != nil {
				return err
			}
			for i := uint64(0); i <= uint64(n); i++ {
				if _, err := r.u32(); err != nil {
					return err
				}
			}
		case op == 0x11: // call_indirect: type, table
			if _, err := r.u32(); err != nil {
				return err
			}
			if _, err := r.u32(); err != nil {
				return err
			}
		case op == 0x1c: // select with types
			n, err := r.u32()
			if err != nil {
				return err
			}
			for range n {
				if _, err := r.valtype(); err != nil {
					return err
				}
			}
		case op >= 0x28 && op <= 0x3e: // loads and stores
			if err := r.memarg(); err != nil {
				return err
			}
		case op == 0x3f || op == 0x40: // memory.size/grow
			if err := r.memidx(); err != nil {
				return err
			}
		case op == 0x41:
			if err := r.sleb(32); err != nil {
				return err
			}
		case op == 0x42:
			if err := r.sleb(64); err != nil {
				return err
			}
		case op == 0x43:
			if err := r.skip(4); err != nil {
				return err
			}
		case op == 0x44:
			if err := r.skip(8); err != nil {
				return err
			}
		case op == 0xd0: // ref.null
			if _, err := r.reftype(); err != nil {
				return err
			}
		case op == 0xfc:
			if err := r.prefixFC(at); err != nil {
				return err
			}
		case op == 0xfd:
			if err := r.prefixFD(at); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: opcode 0x%02x at byte %d", ErrUnsupported, op, at)
		}
	}
}

func (r *reader) prefixFC(at int) error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 7: // saturating truncations
		return nil
	case sub == 8: // memory.init data, mem
		if _, err := r.u32(); err != nil {
			return err
		}
		return r.memidx()
	case sub == 9, sub == 13, sub >= 15 && sub <= 17: // data.drop, elem.drop, table.grow/size/fill
		_, err := r.u32()
		return err
	case sub == 10: // memory.copy mem, mem
		if err := r.memidx(); err != nil {
			return err
		}
		return r.memidx()
	case sub == 11: // memory.fill mem
		return r.memidx()
	case sub == 12, sub == 14: // table.init elem, table; table.copy table, table
		if _, err := r.u32(); err != nil {
			return err
		}
		_, err := r.u32()
		return err
	}
	return fmt.Errorf("%w: opcode 0xfc %d at byte %d", ErrUnsupported, sub, at)
}

// simdReserved lists the unassigned opcodes below 0x100 after 0xfd.
var simdReserved = map[uint32]bool{
	0x9a: true, 0xa2: true, 0xa5: true, 0xa6: true, 0xaf: true, 0xb0: true, 0xb2: true, 0xb3: true,
	0xb4: true, 0xbb: true, 0xc2: true, 0xc5: true, 0xc6: true, 0xcf: true, 0xd0: true, 0xd2: true,
	0xd3: true, 0xd4: true, 0xe2: true, 0xee: true,
}

func (r *reader) prefixFD(at int) error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	switch {
	case sub <= 0x0b, sub == 0x5c, sub == 0x5d: // loads, store, load_zero
		return r.memarg()
	case sub == 0x0c, sub == 0x0d: // v128.const, i8x16.shuffle
		return r.skip(16)
	case sub >= 0x15 && sub <= 0x22: // extract/replace lane
		return r.skip(1)
	case sub >= 0x54 && sub <= 0x5b: // load/store lane
		if err := r.memarg(); err != nil {
			return err
		}
		return r.skip(1)
	case sub <= 0xff && !simdReserved[sub]:
		return nil
	}
	return fmt.Errorf("%w: opcode 0xfd %d at byte %d", ErrUnsupported, sub, at)
}

// reader decodes a window of the input; base is the window's offset in the
// whole binary, for messages.
type reader struct {
	b    []byte
	off  int
	base int
}

func (r *reader) pos() int { return r.base + r.off }

func (r *reader) eof() error {
	return fmt.Errorf("%w: unexpected end at byte %d", ErrMalformed, r.pos())
}

func (r *reader) done(what string) error {
	if r.off != len(r.b) {
		return fmt.Errorf("%w: %s ends at byte %d but its size says %d", ErrMalformed, what, r.pos(), r.base+len(r.b))
	}
	return nil
}

func (r *reader) byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, r.eof()
	}
	c := r.b[r.off]
	r.off++
	return c, nil
}

func (r *reader) skip(n int) error {
	if len(r.b)-r.off < n {
		return r.eof()
	}
	r.off += n
	return nil
}

// u32 reads an unsigned LEB128 of at most 5 bytes whose value fits 32 bits.
func (r *reader) u32() (uint32, error) {
	at := r.pos()
	var v uint64
	for i := 0; i < 5; i++ {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if i == 4 && c > 0x0f {
				break
			}
			return uint32(v), nil
		}
	}
	return 0, fmt.Errorf("%w: invalid u32 LEB128 at byte %d", ErrMalformed, at)
}

// sleb checks a signed LEB128 of the given width and skips it.
func (r *reader) sleb(bits int) error {
	at := r.pos()
	max := (bits + 6) / 7
	for i := 0; i < max; i++ {
		c, err := r.byte()
		if err != nil {
			return err
		}
		if c&0x80 == 0 {
			if i == max-1 {
				// The unused bits of the last byte must repeat the sign.
				used := bits - 7*i // value bits in this byte, sign included
				rest := int8(c<<1) >> 1 >> (used - 1)
				if rest != 0 && rest != -1 {
					break
				}
			}
			return nil
		}
	}
	return fmt.Errorf("%w: invalid s%d LEB128 at byte %d", ErrMalformed, bits, at)
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	if uint64(n) > uint64(len(r.b)-r.off) {
		return "", r.eof()
	}
	s := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return s, nil
}

func isValtype(c byte) bool {
	switch c {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		return true
	}
	return false
}

func (r *reader) valtype() (byte, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	if !isValtype(c) {
		return 0, fmt.Errorf("%w: value type 0x%02x at byte %d", ErrUnsupported, c, r.pos()-1)
	}
	return c, nil
}

func (r *reader) reftype() (byte, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	if c != 0x70 && c != 0x6f {
		return 0, fmt.Errorf("%w: reference type 0x%02x at byte %d", ErrUnsupported, c, r.pos()-1)
	}
	return c, nil
}

func (r *reader) mutability() (byte, error) {
	c, err := r.byte()
	if err != nil {
		return 0, err
	}
	if c > 1 {
		return 0, fmt.Errorf("%w: mutability 0x%02x at byte %d", ErrMalformed, c, r.pos()-1)
	}
	return c, nil
}

func (r *reader) limits() error {
	flag, err := r.byte()
	if err != nil {
		return err
	}
	switch flag {
	case 0:
		_, err = r.u32()
		return err
	case 1:
		if _, err := r.u32(); err != nil {
			return err
		}
		_, err = r.u32()
		return err
	}
	return fmt.Errorf("%w: limits flag 0x%02x (shared or 64-bit) at byte %d", ErrUnsupported, flag, r.pos()-1)
}

// blocktype reads an empty or value block type, or an s33 type index.
func (r *reader) blocktype() error {
	if r.off >= len(r.b) {
		return r.eof()
	}
	if c := r.b[r.off]; c == 0x40 || isValtype(c) {
		r.off++
		return nil
	}
	at := r.pos()
	var v int64
	for i := 0; i < 5; i++ {
		c, err := r.byte()
		if err != nil {
			return err
		}
		v |= int64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if c&0x40 != 0 || (i == 4 && c > 0x0f) {
				break // negative, or past 33 bits: not a type index
			}
			return nil
		}
	}
	return fmt.Errorf("%w: block type at byte %d", ErrUnsupported, at)
}

// memarg reads alignment and offset; a memory index (bit 6 of the
// alignment) means multiple memories, which are not supported.
func (r *reader) memarg() error {
	at := r.pos()
	align, err := r.u32()
	if err != nil {
		return err
	}
	if align >= 64 {
		return fmt.Errorf("%w: memarg with a memory index at byte %d", ErrUnsupported, at)
	}
	_, err = r.u32()
	return err
}

// memidx reads a memory index, which must be 0.
func (r *reader) memidx() error {
	at := r.pos()
	i, err := r.u32()
	if err != nil {
		return err
	}
	if i != 0 {
		return fmt.Errorf("%w: memory index %d at byte %d", ErrUnsupported, i, at)
	}
	return nil
}

func appendU32(b []byte, v uint32) []byte {
	return binary.AppendUvarint(b, uint64(v))
}

// appendS32 appends v as a signed LEB128.
func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	return append(appendU32(b, uint32(len(s))), s...)
}

func appendSection(b []byte, id byte, content []byte) []byte {
	b = append(b, id)
	b = appendU32(b, uint32(len(content)))
	return append(b, content...)
}
