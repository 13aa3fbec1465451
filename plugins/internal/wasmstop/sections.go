package wasmstop

import "fmt"

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
