package api

import (
	"strings"
	"testing"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
)

// TestMemberHeaderLen checks the computed header length against archive/tar
// for record lengths around the digit-count boundaries.
func TestMemberHeaderLen(t *testing.T) {
	var k cachekey.Key
	created := time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)
	for _, size := range []int64{0, 1, 511, 512, 64 << 10, maxUSTARSize, maxUSTARSize + 1} {
		for nameLen := 0; nameLen < 300; nameLen += 7 {
			for _, secs := range []float64{0, 1.5, 123.456789} {
				m := store.Meta{Size: size, Created: created, Name: strings.Repeat("n", nameLen), CompileSeconds: secs}
				if nameLen%2 == 1 {
					m.Backend = "passthrough"
				}
				h, err := memberHeader(k, m, "")
				if err != nil {
					t.Fatal(err)
				}
				got, err := memberHeaderLen(k, m, "")
				if err != nil || got != len(h) {
					t.Fatalf("size %d name %d: computed %d, archive/tar wrote %d (%v)", size, nameLen, got, len(h), err)
				}
			}
		}
	}
}
