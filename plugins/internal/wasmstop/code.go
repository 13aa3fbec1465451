package wasmstop

import "fmt"

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

// growCheck returns the code Instrument inserts before each memory.grow of
// the module's own code: a set stop flag traps there at once. A grow can
// take long (the host copies the memory into a larger buffer), so code that
// grows memory in a loop ran YieldEvery grows, seconds and many times its
// memory limit in discarded buffers, past its deadline before a check.
func growCheck(stop uint32) []byte {
	b := appendU32([]byte{0x23}, stop)       // global.get $stop
	return append(b, 0x04, 0x40, 0x00, 0x0b) // if unreachable end
}

// instrumentCode rewrites the code section's contents, inserting check at
// the entry and after each loop, and grow before each memory.grow; it
// returns them and the number of bodies.
func instrumentCode(s *section, check, grow []byte, globals uint32) ([]byte, uint32, error) {
	r := reader{b: s.content, base: s.start}
	n, err := r.u32()
	if err != nil {
		return nil, 0, err
	}
	out := appendU32(make([]byte, 0, len(s.content)+len(s.content)/16), n)
	var body []byte
	var insns []insn
	record := func(op byte, at, end int) { insns = append(insns, insn{op, at, end}) }
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
		start := br.off // the code, after the locals
		insns = insns[:0]
		if err := scanExpr(&br, globals, record); err != nil {
			return nil, 0, err
		}
		if err := br.done("function body"); err != nil {
			return nil, 0, err
		}
		// Jumps forward in Go's dispatch loops go straight to their
		// block (dispatch.go); then the loops, in the rewritten code.
		code := retargetDispatch(br.b, insns)
		points, err := checkpointsOf(code, start, globals)
		if err != nil {
			return nil, 0, err
		}
		body = append(body[:0], code[:start]...)
		// The check also opens every function: code without loops can
		// still run for ever by recursion that branches (f calls f twice).
		// A body that opens with a loop (after blocks, which do nothing)
		// runs the loop's check at once: Go's compiler starts every
		// function that way, so the check would run twice per call.
		prev := start
		if !opensWithLoop(code[prev:]) {
			body = append(body, check...)
		}
		for _, p := range points {
			body = append(body, code[prev:p.at]...)
			if p.grow {
				body = append(body, grow...)
			} else {
				body = append(body, check...)
			}
			prev = p.at
		}
		body = append(body, code[prev:]...)
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if err := r.done("code section"); err != nil {
		return nil, 0, err
	}
	return out, n, nil
}

// checkpoint is where instrumentCode inserts a check: at is an offset in
// the function body's code; grow tells a memory.grow's check from a loop's.
type checkpoint struct {
	at   int
	grow bool
}

// checkpointsOf returns, in order, the offset right after each loop's block
// type and the offset of each memory.grow in code, a function body whose
// expression starts at start.
func checkpointsOf(code []byte, start int, globals uint32) ([]checkpoint, error) {
	var points []checkpoint
	r := reader{b: code, off: start}
	err := scanExpr(&r, globals, func(op byte, at, end int) {
		switch op {
		case 0x03: // loop
			points = append(points, checkpoint{at: end})
		case 0x40: // memory.grow
			points = append(points, checkpoint{at: at, grow: true})
		}
	})
	return points, err
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
