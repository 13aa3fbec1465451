package wasmstop

// Go's compiler lays out a function's basic blocks as the regions of one
// dispatch loop, and compiles every jump between them, forward ones too, as
//
//	i32.const K; local.set $pc; br $loop
//
// back to the loop's head, which reads $pc and jumps on through a br_table:
//
//	loop                   ;; the dispatch loop (empty block type)
//	  block ... block      ;; m blocks (empty block types)
//	    local.get $pc
//	    br_table ...       ;; label j < m exits block j: region j follows it
//	  end  region 0
//	  end  region 1 ...
//	  end  region m-1
//	end
//
// So each taken branch pays an indirect jump and, once instrumented, the
// loop's stop check. retargetDispatch rewrites the br of a jump to a later
// region into a br to the block that region follows: the same destination,
// reached directly, as a branch to a block label, which wasm only allows
// forward. Jumps to the same or an earlier region still go round the loop
// and its check.
//
// Termination does not depend on this analysis: it only ever replaces a
// loop label with a block label, and a branch to a block label moves
// forward in the code, so every way back still passes a loop's check.
// What depends on it is that the program does what it did, which holds
// because the rewritten br is reached only with $pc just set to K (the two
// instructions before it), from which the loop's head would have gone to
// exactly that region.

// insn is one decoded instruction: its opcode and its bytes in the body
// (opcode at at, immediates up to end).
type insn struct {
	op      byte
	at, end int
}

// dispatchLoop is a recognized dispatch loop: its $pc local, its m blocks,
// the br_table's labels (the default last), and the region the scan is in
// (-1 in the head).
type dispatchLoop struct {
	pc     uint32
	m      int
	labels []uint32
	region int
}

// frame is an open block, loop or if while retargetDispatch walks a body.
type frame struct {
	loop  *dispatchLoop // the dispatch loop itself, or nil
	owner *dispatchLoop // for one of its blocks: that loop, and which block
	block int
}

// retargetDispatch returns code (a function body, as scanExpr decoded it
// into insns; not yet validated) with the branches to later regions of
// every dispatch loop retargeted (see above), or code itself when there are
// none. Whatever the input, it only ever turns a loop label into a block
// label.
func retargetDispatch(code []byte, insns []insn) []byte {
	var out []byte // nil until the first rewrite
	copied := 0    // code[:copied] is in out
	var stack []frame
	for n := 0; n < len(insns); n++ {
		in := insns[n]
		switch in.op {
		case 0x02, 0x04: // block, if
			stack = append(stack, frame{})
		case 0x03: // loop
			d, skip := dispatchAt(code, insns, n)
			stack = append(stack, frame{loop: d})
			if d != nil {
				// The m blocks, innermost (block 0) last; the head's
				// local.get and br_table are not branches to rewrite.
				for j := d.m - 1; j >= 0; j-- {
					stack = append(stack, frame{owner: d, block: j})
				}
				n += skip
			}
		case 0x0b: // end
			if len(stack) == 0 {
				break // the body's own end
			}
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if f.owner != nil {
				f.owner.region = f.block // region j starts after block j
			}
		case 0x0c: // br
			label := immU32(code, in)
			if int(label) >= len(stack) || n < 2 {
				break
			}
			d := stack[len(stack)-1-int(label)].loop
			if d == nil || d.region < 0 || insns[n-1].op != 0x21 || immU32(code, insns[n-1]) != d.pc || insns[n-2].op != 0x41 {
				break
			}
			t := d.target(immS32(code, insns[n-2]))
			if t <= d.region || t >= d.m {
				break // the same or an earlier region: round the loop
			}
			// Block t is open (blocks region+1 .. m-1 are): find its label.
			to := -1
			for i := len(stack) - 1; i >= 0; i-- {
				if stack[i].owner == d && stack[i].block == t {
					to = len(stack) - 1 - i
					break
				}
			}
			if to < 0 {
				break
			}
			out = append(out, code[copied:in.at+1]...)
			out = appendU32(out, uint32(to))
			copied = in.end
		}
	}
	if out == nil {
		return code
	}
	return append(out, code[copied:]...)
}

// dispatchAt recognizes a dispatch loop at insns[n] (a loop): empty block
// types, m >= 1 blocks, local.get, a br_table whose labels all name one of
// the blocks, and the end of the innermost block. It returns the loop and
// how many instructions after the loop its head takes (blocks, local.get,
// br_table; the end is left to the caller), or nil.
func dispatchAt(code []byte, insns []insn, n int) (*dispatchLoop, int) {
	if code[insns[n].at+1] != 0x40 {
		return nil, 0
	}
	m := 0
	for n+1+m < len(insns) && insns[n+1+m].op == 0x02 && code[insns[n+1+m].at+1] == 0x40 {
		m++
	}
	h := n + 1 + m
	if m == 0 || h+2 >= len(insns) || insns[h].op != 0x20 || insns[h+1].op != 0x0e || insns[h+2].op != 0x0b {
		return nil, 0
	}
	labels := brTableLabels(code, insns[h+1])
	for _, l := range labels {
		if int(l) >= m {
			return nil, 0
		}
	}
	return &dispatchLoop{pc: immU32(code, insns[h]), m: m, labels: labels, region: -1}, m + 2
}

// target returns the block (region) the loop's br_table takes for $pc = k.
func (d *dispatchLoop) target(k int32) int {
	if k >= 0 && int64(k) < int64(len(d.labels)-1) {
		return int(d.labels[k])
	}
	return int(d.labels[len(d.labels)-1])
}

// immU32 decodes the u32 immediate of a decoded instruction.
func immU32(code []byte, in insn) uint32 {
	r := reader{b: code[in.at+1 : in.end]}
	v, _ := r.u32()
	return v
}

// immS32 decodes the immediate of a decoded i32.const.
func immS32(code []byte, in insn) int32 {
	var v int64
	shift := 0
	for _, c := range code[in.at+1 : in.end] {
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			break
		}
	}
	return int32(v)
}

// brTableLabels decodes a decoded br_table's labels, the default last.
func brTableLabels(code []byte, in insn) []uint32 {
	r := reader{b: code[in.at+1 : in.end]}
	n, _ := r.u32()
	labels := make([]uint32, 0, n+1)
	for i := uint64(0); i <= uint64(n); i++ {
		l, _ := r.u32()
		labels = append(labels, l)
	}
	return labels
}
