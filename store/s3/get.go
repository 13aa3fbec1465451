package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/store"
)

// readBufSize is a reader's buffer: the unit it reads from the connection,
// and on a whole-blob read the most it withholds until the digest is known.
const readBufSize = 512 << 10

// Get returns the entry's metadata (from its record) and a reader over bytes
// [off, off+n) of its blob, streamed from the server; n < 0 means to the end,
// off past the end gives an empty reader, a negative off is
// store.ErrInvalid. The caller must Close the reader.
//
// A whole-blob read is verified against the record's SHA-256 before its last
// buffer is delivered; on a mismatch, or when the blob is missing or has
// the wrong size, the entry is quarantined (see the package doc) and the
// error wraps store.ErrCorrupt. A ranged read is not verified. The reader
// does not depend on ctx once Get returns; Close ends it.
func (s *Store) Get(ctx context.Context, ns string, key store.Key, off, n int64) (store.Meta, io.ReadCloser, error) {
	if err := store.CheckNamespace("get entry", ns); err != nil {
		return store.Meta{}, nil, err
	}
	if off < 0 {
		return store.Meta{}, nil, fmt.Errorf("get entry %s/%s: %w: negative offset %d", ns, key, store.ErrInvalid, off)
	}
	if err := s.enter(); err != nil {
		return store.Meta{}, nil, err
	}
	if err := ctx.Err(); err != nil {
		return store.Meta{}, nil, fmt.Errorf("get entry %s/%s: %w", ns, key, err)
	}
	m, inline, err := s.readRecordData(ctx, ns, key)
	if err != nil {
		return store.Meta{}, nil, err
	}
	off = min(off, m.Size)
	if n < 0 || n > m.Size-off {
		n = m.Size - off
	}
	if inline != nil {
		// The bytes came with the record: check them all, whatever the range.
		if int64(len(inline)) != m.Size || sha256.Sum256(inline) != m.SHA256 {
			return store.Meta{}, nil, s.quarantine(m, fmt.Sprintf("inline bytes (%d) fail the record's size or sha256", len(inline)), false)
		}
		return m, io.NopCloser(bytes.NewReader(inline[off : off+n])), nil
	}
	whole := off == 0 && n == m.Size
	if n == 0 && !whole {
		return m, io.NopCloser(bytes.NewReader(nil)), nil
	}
	name := s.blobName(m.SHA256)
	gopts := minio.GetObjectOptions{}
	if !whole {
		if err := gopts.SetRange(off, off+n-1); err != nil {
			return store.Meta{}, nil, fmt.Errorf("get entry %s/%s: %w", ns, key, err)
		}
	}
	// The body outlives ctx (the caller streams it after Get returns), so
	// the request gets a context of its own, canceled by ctx only until the
	// response arrives, and by Close.
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	body, info, _, err := s.core.GetObject(bctx, s.cfg.Bucket, name, gopts)
	stop()
	if err != nil {
		cancel()
		if isNotFound(err) {
			return store.Meta{}, nil, s.quarantine(m, "blob missing", true)
		}
		return store.Meta{}, nil, fmt.Errorf("get entry %s/%s: %w", ns, key, s.fault("get blob", name, err))
	}
	if whole && info.Size != m.Size {
		body.Close()
		cancel()
		return store.Meta{}, nil, s.quarantine(m, fmt.Sprintf("blob is %d bytes, record says %d", info.Size, m.Size), true)
	}
	r := &reader{s: s, m: m, name: name, body: body, cancel: cancel, want: n, bufp: s.rbufs.Get().(*[]byte)}
	if whole {
		r.h = sha256.New()
	}
	return m, r, nil
}

// reader streams a blob's bytes; on a whole-blob read (h != nil) it hashes
// them and withholds the last buffer until the digest matches.
type reader struct {
	s      *Store
	m      store.Meta
	name   string
	body   io.ReadCloser
	cancel context.CancelFunc
	h      hash.Hash

	want    int64 // bytes to deliver in all
	got     int64 // bytes read from body
	bufp    *[]byte
	pending []byte      // verified (or unverifiable) bytes not yet delivered
	stall   *time.Timer // cancels the request when a read waits past ReadTimeout
	stalled atomic.Bool
	err     error
	eof     bool
	once    sync.Once
}

// Read implements io.Reader.
func (r *reader) Read(p []byte) (int, error) {
	if err := r.next(); err != nil {
		return 0, err
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// WriteTo writes the rest of the blob to w one buffer at a time (io.Copy
// prefers it to Read, sparing a copy).
func (r *reader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if err := r.next(); err == io.EOF {
			return total, nil
		} else if err != nil {
			return total, err
		}
		n, err := w.Write(r.pending)
		total += int64(n)
		r.pending = r.pending[n:]
		if err != nil {
			return total, err
		}
	}
}

// next makes pending non-empty or returns why it cannot (io.EOF at the end).
func (r *reader) next() error {
	if r.s.closed.Load() {
		return fmt.Errorf("read s3://%s/%s: %w", r.s.cfg.Bucket, r.name, store.ErrClosed)
	}
	for len(r.pending) == 0 {
		switch {
		case r.err != nil:
			return r.err
		case r.eof:
			return io.EOF
		case r.bufp == nil:
			return fmt.Errorf("read s3://%s/%s: reader is closed", r.s.cfg.Bucket, r.name)
		}
		r.fill()
	}
	return nil
}

// fill reads the next buffer from the body. The buffer that reaches the end
// of a whole blob becomes pending only if the digest of all bytes matches.
func (r *reader) fill() {
	buf := *r.bufp
	if d := r.s.cfg.ReadTimeout; d > 0 {
		if r.stall == nil {
			r.stall = time.AfterFunc(d, func() { r.stalled.Store(true); r.cancel() })
		} else {
			r.stall.Reset(d)
		}
	}
	n, err := io.ReadFull(r.body, buf[:min(int64(len(buf)), r.want-r.got)])
	if r.stall != nil && !r.stall.Stop() && r.stalled.Load() {
		err = fmt.Errorf("no bytes for %s: %w: %w", r.s.cfg.ReadTimeout, store.ErrUnavailable, err)
	}
	r.got += int64(n)
	if r.h != nil {
		r.h.Write(buf[:n])
	}
	if err != nil {
		// The length was checked when the response began, so a short body
		// is a cut connection, not damage.
		r.err = fmt.Errorf("read entry %s/%s: %w", r.m.Namespace, r.m.Key, r.s.fault("read blob", r.name, err))
		return
	}
	if r.got == r.want {
		if r.h != nil {
			var sum [32]byte
			if r.h.Sum(sum[:0]); sum != r.m.SHA256 {
				r.err = r.s.quarantine(r.m, fmt.Sprintf("blob sha256 is %x", sum), true)
				return
			}
		}
		r.eof = true
	}
	r.pending = buf[:n]
}

// Close ends the request and releases the buffer.
func (r *reader) Close() error {
	var err error
	r.once.Do(func() {
		if r.stall != nil {
			r.stall.Stop()
		}
		err = r.body.Close()
		r.cancel()
		r.s.rbufs.Put(r.bufp)
		r.bufp, r.pending = nil, nil
	})
	return err
}

// quarantine takes an entry whose bytes failed verification out of service
// for every replica: its record moves under quarantine/ and the damaged blob
// (hasBlob: not an inline entry) is deleted, so that the next Put of the key
// stores it afresh. It returns the error wrapping store.ErrCorrupt that the
// reader reports.
func (s *Store) quarantine(m store.Meta, why string, hasBlob bool) error {
	s.usage.integrity.Add(1)
	rec, blob := s.entryName(m.Namespace, m.Key), s.blobName(m.SHA256)
	s.log.Error("s3 entry failed verification; quarantined", "namespace", m.Namespace, "key", m.Key.String(),
		"blob", blob, "reason", why)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := s.core.CopyObject(ctx, s.cfg.Bucket, rec, s.cfg.Bucket, s.quarantineName(m.Namespace, m.Key), nil,
		minio.CopySrcOptions{}, minio.PutObjectOptions{})
	if err != nil {
		s.log.Warn("copy record to quarantine failed", "object", rec, "err", err)
	}
	if err := s.core.RemoveObject(ctx, s.cfg.Bucket, rec, minio.RemoveObjectOptions{}); err != nil {
		s.log.Warn("remove quarantined record failed", "object", rec, "err", err)
	} else {
		s.usage.add(-1, 0, 0)
	}
	if !hasBlob {
		return fmt.Errorf("read entry %s/%s: %s: %w", m.Namespace, m.Key, why, store.ErrCorrupt)
	}
	if err := s.core.RemoveObject(ctx, s.cfg.Bucket, blob, minio.RemoveObjectOptions{}); err != nil {
		s.log.Warn("remove damaged blob failed", "object", blob, "err", err)
	} else {
		s.usage.add(0, -1, -m.Size)
	}
	return fmt.Errorf("read entry %s/%s: %s: %w", m.Namespace, m.Key, why, store.ErrCorrupt)
}
