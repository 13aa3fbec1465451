package main

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"fmt"
	"io"
)

// casBodies makes bodies for a content-addressed server (bazel-remote's
// /cas/<sha256>, which rejects a blob whose SHA-256 is not its key) without
// hashing every body in the load generator: that would spend the client's
// share of the two cores on SHA-256 while it measures the server's. Every
// entry of one size shares a prefix (a 4 KiB block repeated, as newContent
// makes) and differs only in its last 64-127 bytes, so its digest is one
// saved SHA-256 state after the prefix plus one or two blocks.
type casBodies struct {
	block     [4096]byte
	prefixLen int64
	state     []byte // sha256 state after the prefix (encoding.BinaryMarshaler)
}

func newCASBodies(cfg config) *casBodies {
	c := &casBodies{}
	if cfg.size >= 128 {
		c.prefixLen = cfg.size/64*64 - 64
	}
	seed := sha256.Sum256([]byte(fmt.Sprintf("cas/%s/%d", cfg.seed, cfg.size)))
	for j := 0; j < len(c.block); j += len(seed) {
		copy(c.block[j:], seed[:])
		seed = sha256.Sum256(seed[:])
	}
	h := sha256.New()
	if _, err := io.Copy(h, c.prefix()); err != nil {
		fatalf("hash the shared prefix: %v", err)
	}
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		fatalf("save the SHA-256 state: %v", err)
	}
	c.state = state
	return c
}

func (c *casBodies) prefix() io.Reader {
	return &content{block: c.block, left: c.prefixLen}
}

// tail is entry i's own bytes, after the shared prefix.
func (c *casBodies) tail(cfg config, i int) []byte {
	n := int(cfg.size - c.prefixLen)
	out := make([]byte, 0, n+sha256.Size)
	k := key(cfg, i)
	for j := 0; len(out) < n; j++ {
		sum := sha256.Sum256([]byte(fmt.Sprintf("tail/%s/%d", k, j)))
		out = append(out, sum[:]...)
	}
	return out[:n]
}

func (c *casBodies) body(cfg config, i int) io.Reader {
	return io.MultiReader(c.prefix(), bytes.NewReader(c.tail(cfg, i)))
}

// digest is the hex SHA-256 of entry i's body: its key in the CAS.
func (c *casBodies) digest(cfg config, i int) string {
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(c.state); err != nil {
		fatalf("restore the SHA-256 state: %v", err)
	}
	h.Write(c.tail(cfg, i))
	return hex.EncodeToString(h.Sum(nil))
}
