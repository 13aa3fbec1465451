package api

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// planned is one member of a batch, from the entry's metadata.
type planned struct {
	key    cachekey.Key
	size   int64
	sha    [32]byte
	sig    string // PAXSignature, "" without a signing key
	hdrLen int
	hit    Lookup // reported once the member is sent whole
}

// tarPad is the zero padding after a member's data.
func tarPad(size int64) int64 { return (512 - size%512) % 512 }

// paxRecords are the PAX records of an entry's member; sig, if not empty,
// is its signature.
func paxRecords(m store.Meta, sig string) map[string]string {
	pax := map[string]string{
		wire.PAXSHA256:         hex.EncodeToString(m.SHA256[:]),
		wire.PAXCompileSeconds: strconv.FormatFloat(m.CompileSeconds, 'f', -1, 64),
	}
	if m.Name != "" && utf8.ValidString(m.Name) {
		pax[wire.PAXName] = m.Name
	}
	if m.Backend != "" && utf8.ValidString(m.Backend) {
		pax[wire.PAXBackend] = m.Backend
	}
	if sig != "" {
		pax[wire.PAXSignature] = sig
	}
	return pax
}

// memberHeader returns the tar header blocks (PAX extended header and the
// member's own header) for an entry.
func memberHeader(k cachekey.Key, m store.Meta, sig string) ([]byte, error) {
	return tarHeader(k, m, paxRecords(m, sig))
}

// tarHeader returns the tar header blocks of an entry's member with the
// PAX records pax.
func tarHeader(k cachekey.Key, m store.Meta, pax map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := tw.WriteHeader(&tar.Header{
		Typeflag:   tar.TypeReg,
		Name:       k.String(),
		Mode:       0o644,
		Size:       m.Size,
		ModTime:    m.Created.Truncate(time.Second),
		Format:     tar.FormatPAX,
		PAXRecords: pax,
	})
	return buf.Bytes(), err
}

// maxUSTARSize is the largest size a USTAR header holds (11 octal digits);
// larger members need a PAX size record that memberHeaderLen does not count.
const maxUSTARSize = 1<<33 - 1

// memberHeaderLen returns len(memberHeader(k, m)) without building it: the
// PAX header block, its records padded to 512 bytes, and the member's header
// block. (Names are 64 characters and times whole seconds, so archive/tar
// adds no records of its own below maxUSTARSize.) writeMember checks the
// real length against it and aborts the stream on a mismatch.
func memberHeaderLen(k cachekey.Key, m store.Meta, sig string) (int, error) {
	if m.Size > maxUSTARSize {
		h, err := memberHeader(k, m, sig)
		return len(h), err
	}
	n := 0
	for key, v := range paxRecords(m, sig) {
		size := len(key) + len(v) + 3 // ' ', '=', '\n'
		size += len(strconv.Itoa(size))
		if size2 := len(strconv.Itoa(size)) + len(key) + len(v) + 3; size2 != size {
			size = size2
		}
		n += size
	}
	return 512 + (n+511)/512*512 + 512, nil
}

// tarTail returns the missing.json member and the end-of-archive blocks.
func tarTail(missing wire.MissingList) ([]byte, error) {
	return jsonTail(wire.MissingMember, missing)
}

// jsonTail returns a last member named name holding v as JSON, and the
// end-of-archive blocks.
func jsonTail(name string, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body)), Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(body); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// batchStream is the body of a batch response. fasthttp copies it with
// WriteTo (io.CopyBuffer prefers it), which writes entries in large pieces;
// Read is there for other callers. fasthttp closes it when done.
type batchStream struct {
	store   Store
	out     Outcomes
	io      *streams
	log     *slog.Logger
	ns      string
	members []planned
	// misses are the keys missing.json lists, counted when every member
	// was sent (each member's hit once its bytes are): a stream that
	// breaks counts what it delivered, and the client's retry the rest.
	misses []Lookup
	tail   []byte
	total  int64
	pipedBody
}

// WriteTo writes the whole stream to w. An error means the stream must be
// aborted: fasthttp then closes the connection short of Content-Length.
func (b *batchStream) WriteTo(w io.Writer) (n int64, err error) {
	defer b.io.recovered(&err, "batch")
	cw := &countingWriter{w: w}
	err = b.write(cw)
	b.io.bytesOut.Add(float64(cw.n))
	switch {
	case err == nil || b.ctx.Err() != nil:
	case cw.err != nil: // the client went away
		b.log.Info("batch stream cut by the client", "namespace", b.ns, "members", len(b.members), "sent", cw.n, "of", b.total, "err", err)
	default:
		b.log.Error("batch stream aborted", "namespace", b.ns, "members", len(b.members), "sent", cw.n, "of", b.total, "err", err)
	}
	return cw.n, err
}

func (b *batchStream) write(w io.Writer) error {
	buf := make([]byte, 256<<10)
	for _, p := range b.members {
		m, rc, err := b.store.Get(b.ctx, b.ns, p.key, 0, -1)
		if err != nil {
			return fmt.Errorf("get %s/%s: %w", b.ns, p.key, err)
		}
		err = b.writeMember(w, p, m, rc, buf)
		rc.Close()
		if err != nil {
			return fmt.Errorf("stream %s/%s: %w", b.ns, p.key, err)
		}
		b.out.Lookup(p.hit)
	}
	// Before missing.json, not after: a client that read it finds its
	// misses counted.
	for _, l := range b.misses {
		b.out.Lookup(l)
	}
	if _, err := w.Write(b.tail); err != nil {
		return fmt.Errorf("write %s: %w", wire.MissingMember, err)
	}
	return nil
}

func (b *batchStream) writeMember(w io.Writer, p planned, m store.Meta, r io.Reader, buf []byte) error {
	if m.Size != p.size || m.SHA256 != p.sha {
		return errors.New("entry changed since the batch was planned")
	}
	hdr, err := memberHeader(p.key, m, p.sig)
	if err != nil || len(hdr) != p.hdrLen {
		return fmt.Errorf("tar header changed since the batch was planned: %w", err)
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	return copyMember(w, r, m.Size, buf)
}

// copyMember writes size bytes of r to w through buf, then the member's
// tar padding. r ending early is an error: the stream must be aborted.
func copyMember(w io.Writer, r io.Reader, size int64, buf []byte) error {
	var n int64
	for n < size {
		k, err := r.Read(buf[:min(int64(len(buf)), size-n)])
		if k > 0 {
			if _, werr := w.Write(buf[:k]); werr != nil {
				return werr
			}
			n += int64(k)
		}
		if err == io.EOF && n < size {
			return fmt.Errorf("entry ended after %d of %d bytes", n, size)
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("read after %d bytes: %w", n, err)
		}
	}
	if pad := tarPad(size); pad > 0 {
		clear(buf[:pad])
		if _, err := w.Write(buf[:pad]); err != nil {
			return err
		}
	}
	return nil
}

// Read reads the stream through a pipe fed by WriteTo.
func (b *batchStream) Read(p []byte) (int, error) { return b.read(b, p) }

// Close stops the stream and ends its in-flight count.
func (b *batchStream) Close() error {
	b.close(b.io.inflight)
	return nil
}

// pipedBody is the Read and Close of a streamed response body that writes
// itself with WriteTo (batch and export): other readers than fasthttp read
// it through a pipe fed by WriteTo, and Close cancels the writing and ends
// the body's in-flight count, once.
type pipedBody struct {
	ctx       context.Context
	cancel    context.CancelFunc
	pr        *io.PipeReader
	closeOnce sync.Once
}

// read reads wt's stream through the pipe, starting it on first use.
func (b *pipedBody) read(wt io.WriterTo, p []byte) (int, error) {
	if b.pr == nil {
		pr, pw := io.Pipe()
		b.pr = pr
		go func() {
			_, err := wt.WriteTo(pw)
			pw.CloseWithError(err)
		}()
	}
	return b.pr.Read(p)
}

// close cancels the stream and decrements inflight, once.
func (b *pipedBody) close(inflight *atomic.Int64) {
	b.closeOnce.Do(func() {
		b.cancel()
		if b.pr != nil {
			b.pr.Close()
		}
		inflight.Add(-1)
	})
}

// countingWriter counts bytes written through it and keeps the first
// write error.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

// Write writes p and counts it.
func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}
