package store

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestCopySumIsCopyThenChunkSum checks that copySum's piecewise pass gives
// the bytes and the checksum of a copy followed by chunkSum, at every size
// around its piece boundaries.
func TestCopySumIsCopyThenChunkSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	u := newUploadID()
	for _, n := range []int{0, 1, 7, sumPiece - 1, sumPiece, sumPiece + 1, 3*sumPiece + 17, 1 << 20} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		dst := bytes.Repeat([]byte{0xAA}, n+8)
		for _, idx := range []uint32{0, 5} {
			if got, want := copySum(dst, src, u, idx), chunkSum(u, idx, src); got != want {
				t.Errorf("n=%d idx=%d: copySum = %#x, chunkSum = %#x", n, idx, got, want)
			}
			if !bytes.Equal(dst[:n], src) {
				t.Errorf("n=%d idx=%d: copied bytes differ from the source", n, idx)
			}
			if !bytes.Equal(dst[n:], bytes.Repeat([]byte{0xAA}, 8)) {
				t.Errorf("n=%d idx=%d: wrote past len(src)", n, idx)
			}
		}
	}
}
