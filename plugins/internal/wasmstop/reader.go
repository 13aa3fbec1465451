package wasmstop

import "fmt"

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
