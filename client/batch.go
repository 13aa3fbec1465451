package client

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/cachesvc/cachesvc/wire"
)

// ErrBrokenStream means a batch stream ended or failed before its final
// missing.json member: some entries may be absent and must not be trusted
// as missing.
var ErrBrokenStream = errors.New("batch stream is incomplete")

// Member describes one entry of a batch stream.
type Member struct {
	Key            string
	Name           string
	Backend        string
	Size           int64
	SHA256         string // 64 hex characters
	CompileSeconds float64
	// Signature is the server's base64 Ed25519 signature of the key and
	// SHA256 (CACHESVC.signature); empty when the server does not sign.
	Signature string
}

// Batch fetches keys in one request and calls fn for each entry found, in
// order, with a reader over its bytes (valid only during the call). It
// returns the keys the server did not have. After fn returns, the rest of the
// member is read and its SHA-256 checked; a mismatch, a broken stream or
// fn's error ends the batch.
func (c *Client) Batch(ctx context.Context, ns string, keys []string, fn func(m Member, r io.Reader) error) (missing []string, err error) {
	data, err := json.Marshal(wire.KeysRequest{Keys: keys})
	if err != nil {
		return nil, fmt.Errorf("encode batch: %w", err)
	}
	req, err := c.newRequest(ctx, http.MethodPost, c.url(ns, "batch"), bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	// Large reads from the connection: tar asks for small pieces.
	tr := tar.NewReader(bufio.NewReaderSize(resp.Body, 256<<10))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%w: no %s member", ErrBrokenStream, wire.MissingMember)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: read member header: %w", ErrBrokenStream, err)
		}
		if h.Name == wire.MissingMember {
			var m struct {
				Missing []string `json:"missing"`
			}
			if err := json.NewDecoder(io.LimitReader(tr, 8<<20)).Decode(&m); err != nil {
				return nil, fmt.Errorf("%w: decode %s: %w", ErrBrokenStream, wire.MissingMember, err)
			}
			return m.Missing, nil
		}
		m := Member{
			Key: h.Name, Size: h.Size,
			Name:      h.PAXRecords[wire.PAXName],
			Backend:   h.PAXRecords[wire.PAXBackend],
			SHA256:    h.PAXRecords[wire.PAXSHA256],
			Signature: h.PAXRecords[wire.PAXSignature],
		}
		if s := h.PAXRecords[wire.PAXCompileSeconds]; s != "" {
			m.CompileSeconds, _ = strconv.ParseFloat(s, 64)
		}
		hsh := sha256.New()
		r := &streamReader{r: io.TeeReader(tr, hsh)}
		if err := fn(m, r); err != nil {
			if r.err != nil { // the stream broke under fn
				return nil, fmt.Errorf("%w: read %s: %w", ErrBrokenStream, m.Key, r.err)
			}
			return nil, fmt.Errorf("handle %s: %w", m.Key, err)
		}
		if _, err := io.Copy(hsh, tr); err != nil {
			return nil, fmt.Errorf("%w: read %s: %w", ErrBrokenStream, m.Key, err)
		}
		if got := hex.EncodeToString(hsh.Sum(nil)); m.SHA256 != "" && got != m.SHA256 {
			return nil, fmt.Errorf("%w: member %s has sha256 %s, header says %s", ErrBrokenStream, m.Key, got, m.SHA256)
		}
	}
}

// streamReader remembers the first read error other than io.EOF, so that a
// callback's failure caused by a broken stream is reported as one.
type streamReader struct {
	r   io.Reader
	err error
}

// Read reads from the member.
func (s *streamReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}
