package wasmstop

import "fmt"

// scanExpr decodes instructions up to and including the end that closes
// depth 0 (a function body or a constant expression). It checks that global
// indices are below globals and, if visit is not nil, calls it for each
// instruction with its opcode and the offsets in r.b of the opcode and of
// the byte after its immediates.
func scanExpr(r *reader, globals uint32, visit func(op byte, at, end int)) error {
	depth := 0
	for {
		at := r.pos()
		start := r.off
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
		case op == 0x0b: // end
			if depth == 0 {
				if visit != nil {
					visit(op, start, r.off)
				}
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
		if visit != nil {
			visit(op, start, r.off)
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
