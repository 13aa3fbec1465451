package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/store"
)

// maxParts is S3's limit on the parts of one multipart upload.
const maxParts = 10000

// Put streams r into the entry (ns, key): the blob first, verified and
// complete (see the package doc), then the entry record, created only if no
// record exists.
//
// # Errors
//
//   - store.ErrInvalid: bad namespace, too many or too long labels.
//   - store.ErrTooLarge: opts.Size, or the bytes read, exceed
//     Config.MaxEntryBytes (or S3's 10,000 parts).
//   - store.ErrSizeMismatch, store.ErrDigestMismatch: the body is not what
//     opts declared; nothing is stored (a multipart upload is aborted).
//   - store.ErrConflict: a record with another digest exists; untouched.
//   - store.ErrUnavailable: the server cannot be reached or failed (5xx).
//   - ctx errors and r's errors, wrapped.
//
// A Put of a key that already has a record only reads and hashes the body,
// uploading nothing. The body is never held whole: at most one
// Config.PartSize buffer per Put.
func (s *Store) Put(ctx context.Context, ns string, key store.Key, r io.Reader, opts store.PutOptions) (store.PutResult, error) {
	var res store.PutResult
	if err := store.CheckNamespace("put entry", ns); err != nil {
		return res, err
	}
	if err := store.CheckPutOptions(opts); err != nil {
		return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
	}
	if err := s.enter(); err != nil {
		return res, err
	}
	if max := s.cfg.MaxEntryBytes; max > 0 && opts.Size > max {
		return res, fmt.Errorf("put entry %s/%s: declared size %d over the %d byte limit: %w", ns, key, opts.Size, max, store.ErrTooLarge)
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
	}
	b := &body{r: r, ctx: ctx, h: sha256.New(), declared: opts.Size, max: s.cfg.MaxEntryBytes}
	existing, err := s.readRecord(ctx, ns, key)
	if err == nil {
		if _, err := io.Copy(io.Discard, b); err != nil {
			return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
		}
		sha, err := b.finish(opts)
		if err != nil {
			return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
		}
		return existingResult(existing, sha)
	} else if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrCorrupt) {
		// (A record that did not decode was just quarantined: store afresh.)
		return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
	}
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	sha, size, inline, err := s.putBlob(ctx, b, *bp, opts)
	if err != nil {
		return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
	}
	m := store.Meta{
		Namespace: ns, Key: key, Size: size, SHA256: sha, Created: time.Now().UTC(),
		Backend: opts.Backend, Name: opts.Name, CompileSeconds: opts.CompileSeconds,
		Writer: opts.Writer, Run: opts.Run, Labels: opts.Labels, Components: opts.Components,
	}
	m.LastAccess = m.Created
	if !opts.Created.IsZero() {
		m.Created = opts.Created.UTC() // an import keeps the first store's time
	}
	return s.createRecord(ctx, m, inline)
}

// existingResult is a Put's answer when a record already exists.
func existingResult(existing store.Meta, sha [32]byte) (store.PutResult, error) {
	if existing.SHA256 != sha {
		return store.PutResult{}, fmt.Errorf("put entry %s/%s: %w", existing.Namespace, existing.Key, store.ErrConflict)
	}
	return store.PutResult{Meta: existing, Created: false}, nil
}

// body reads a Put's body, hashing it and enforcing the declared size and
// the entry limit as it goes.
type body struct {
	r        io.Reader
	ctx      context.Context
	h        hash.Hash
	n        int64
	declared int64 // > 0 when declared
	max      int64 // > 0 when limited
}

// Read implements io.Reader.
func (b *body) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := b.r.Read(p)
	b.h.Write(p[:n])
	b.n += int64(n)
	switch {
	case b.declared > 0 && b.n > b.declared:
		return n, fmt.Errorf("body longer than the declared %d bytes: %w", b.declared, store.ErrSizeMismatch)
	case b.max > 0 && b.n > b.max:
		return n, fmt.Errorf("body over the %d byte limit: %w", b.max, store.ErrTooLarge)
	case err == io.EOF && b.declared > 0 && b.n != b.declared:
		return n, fmt.Errorf("body of %d bytes, declared %d: %w", b.n, b.declared, store.ErrSizeMismatch)
	case err != nil && err != io.EOF:
		return n, fmt.Errorf("read body: %w", err)
	}
	return n, err
}

// finish returns the digest of a body read to EOF, checking it against the
// declared one.
func (b *body) finish(opts store.PutOptions) ([32]byte, error) {
	var sha [32]byte
	b.h.Sum(sha[:0])
	if opts.SHA256 != nil && *opts.SHA256 != sha {
		return sha, fmt.Errorf("body sha256 %x, declared %x: %w", sha, *opts.SHA256, store.ErrDigestMismatch)
	}
	if err := b.ctx.Err(); err != nil {
		return sha, err
	}
	return sha, nil
}

// fill reads into buf until it is full or the body ends (eof).
func fill(r io.Reader, buf []byte) (n int, eof bool, err error) {
	n, err = io.ReadFull(r, buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return n, true, nil
	}
	return n, false, err
}

// putBlob stores the body's blob and returns its digest and size. A body
// that fits one part is verified in memory and sent in one PUT; a larger
// one goes multipart (putLargeBlob); one of at most Config.InlineMax bytes
// is not stored but returned (inline, a slice of buf) for its record.
func (s *Store) putBlob(ctx context.Context, b *body, buf []byte, opts store.PutOptions) (sha [32]byte, size int64, inline []byte, err error) {
	n, eof, err := fill(b, buf)
	if err != nil {
		return sha, 0, nil, err
	}
	if !eof {
		sha, size, err := s.putLargeBlob(ctx, b, buf, opts)
		return sha, size, nil, err
	}
	if sha, err = b.finish(opts); err != nil {
		return sha, 0, nil, err
	}
	if int64(n) <= s.cfg.InlineMax {
		return sha, int64(n), buf[:n], nil
	}
	size, err = s.putSmallBlob(ctx, buf[:n], sha)
	return sha, size, nil, err
}

// putSmallBlob stores a verified body of one part in one PUT.
func (s *Store) putSmallBlob(ctx context.Context, data []byte, sha [32]byte) (int64, error) {
	n := len(data)
	name := s.blobName(sha)
	// A blob that exists has these bytes already: a HEAD spares sending
	// them again.
	if _, err := s.core.StatObject(ctx, s.cfg.Bucket, name, minio.StatObjectOptions{}); err == nil {
		return int64(n), nil
	} else if !isNotFound(err) {
		return 0, s.fault("stat blob", name, err)
	}
	popts := minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true}
	if !s.cfg.CheckThenWrite {
		popts.SetMatchETagExcept("*") // a concurrent writer may have stored it since
	}
	// The digest goes as the signed payload hash: the server checks it too.
	_, err := s.core.PutObject(ctx, s.cfg.Bucket, name, bytes.NewReader(data), int64(n), "", hex.EncodeToString(sha[:]), popts)
	switch {
	case err == nil:
		s.usage.add(0, 1, int64(n))
	case isPreconditionFailed(err):
	default:
		// A server refusing the conditional PUT early may reset the
		// connection instead of answering 412 (versitygw does while
		// another upload of the blob is in flight): the blob existing now
		// is all that matters.
		if _, serr := s.core.StatObject(ctx, s.cfg.Bucket, name, minio.StatObjectOptions{}); serr != nil {
			return 0, s.fault("put blob", name, err)
		}
	}
	return int64(n), nil
}

func isPreconditionFailed(err error) bool {
	return minio.ToErrorResponse(err).StatusCode == http.StatusPreconditionFailed
}

// putLargeBlob uploads a body larger than one part, whose first part is in
// buf, as a multipart upload completed only once the whole body is hashed
// and checked. With a declared digest the upload goes straight to the
// blob's name (or, when that blob exists, the body is only hashed); without
// one it goes to uploads/<random> and is copied to the blob's name.
func (s *Store) putLargeBlob(ctx context.Context, b *body, buf []byte, opts store.PutOptions) ([32]byte, int64, error) {
	var name string
	if opts.SHA256 != nil {
		name = s.blobName(*opts.SHA256)
		_, err := s.core.StatObject(ctx, s.cfg.Bucket, name, minio.StatObjectOptions{})
		if err == nil {
			if _, err := io.Copy(io.Discard, b); err != nil {
				return [32]byte{}, 0, err
			}
			sha, err := b.finish(opts)
			return sha, b.n, err
		}
		if !isNotFound(err) {
			return [32]byte{}, 0, s.fault("stat blob", name, err)
		}
	} else {
		var rnd [16]byte
		_, _ = rand.Read(rnd[:])
		name = s.cfg.Prefix + "uploads/" + hex.EncodeToString(rnd[:])
	}
	sha, err := s.multipart(ctx, name, b, buf, opts)
	if err != nil {
		return sha, 0, err
	}
	if opts.SHA256 != nil {
		s.usage.add(0, 1, b.n)
		return sha, b.n, nil
	}
	return sha, b.n, s.promote(ctx, name, sha, b.n)
}

// multipart uploads the body to name, part by part from buf (which holds
// the first, full part), and completes the upload only when the body
// passes finish; on any error the upload is aborted, so nothing is visible.
func (s *Store) multipart(ctx context.Context, name string, b *body, buf []byte, opts store.PutOptions) (sha [32]byte, err error) {
	id, err := s.core.NewMultipartUpload(ctx, s.cfg.Bucket, name, minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return sha, s.fault("start multipart upload", name, err)
	}
	done := false
	defer func() {
		if done {
			return
		}
		// The Put's ctx may be what ended it: abort on a context of its own.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if aerr := s.core.AbortMultipartUpload(actx, s.cfg.Bucket, name, id); aerr != nil {
			s.log.Warn("abort multipart upload failed; the server's incomplete-upload expiry must collect it",
				"object", name, "err", aerr)
		}
	}()
	var parts []minio.CompletePart
	data := buf
	for {
		num := len(parts) + 1
		if num > maxParts {
			return sha, fmt.Errorf("body over %d parts of %d bytes: %w", maxParts, len(buf), store.ErrTooLarge)
		}
		p, err := s.core.PutObjectPart(ctx, s.cfg.Bucket, name, id, num, bytes.NewReader(data), int64(len(data)), minio.PutObjectPartOptions{})
		if err != nil {
			return sha, s.fault(fmt.Sprintf("put part %d of", num), name, err)
		}
		parts = append(parts, minio.CompletePart{PartNumber: num, ETag: p.ETag})
		// A short last part is sent by one more round, after which fill
		// returns 0 bytes.
		n, _, err := fill(b, buf)
		if err != nil {
			return sha, err
		}
		if n == 0 {
			break
		}
		data = buf[:n]
	}
	if sha, err = b.finish(opts); err != nil {
		return sha, err
	}
	if _, err := s.core.CompleteMultipartUpload(ctx, s.cfg.Bucket, name, id, parts, minio.PutObjectOptions{}); err != nil {
		return sha, s.fault("complete multipart upload", name, err)
	}
	done = true
	return sha, nil
}

// promote copies a verified temporary upload to its blob name (server side,
// multipart for large objects) unless that blob exists, and deletes the
// temporary.
func (s *Store) promote(ctx context.Context, tmp string, sha [32]byte, size int64) error {
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := s.core.RemoveObject(rctx, s.cfg.Bucket, tmp, minio.RemoveObjectOptions{}); err != nil {
			s.log.Warn("remove temporary upload failed; gc must collect it", "object", tmp, "err", err)
		}
	}()
	name := s.blobName(sha)
	if _, err := s.core.StatObject(ctx, s.cfg.Bucket, name, minio.StatObjectOptions{}); err == nil {
		return nil
	} else if !isNotFound(err) {
		return s.fault("stat blob", name, err)
	}
	_, err := s.core.ComposeObject(ctx,
		minio.CopyDestOptions{Bucket: s.cfg.Bucket, Object: name},
		minio.CopySrcOptions{Bucket: s.cfg.Bucket, Object: tmp})
	if err != nil {
		return s.fault("copy "+tmp+" to", name, err)
	}
	s.usage.add(0, 1, size)
	return nil
}

// createRecord writes m's record unless one exists (If-None-Match: *, or a
// stat first under Config.CheckThenWrite). When one does, the Put is a no-op
// for the same digest and a conflict for another.
func (s *Store) createRecord(ctx context.Context, m store.Meta, inline []byte) (store.PutResult, error) {
	name := s.entryName(m.Namespace, m.Key)
	js, err := encodeRecord(m, inline)
	if err != nil {
		return store.PutResult{}, fmt.Errorf("put entry %s/%s: %w", m.Namespace, m.Key, err)
	}
	popts := minio.PutObjectOptions{ContentType: "application/json", DisableMultipart: true}
	if s.cfg.CheckThenWrite {
		if existing, err := s.readRecord(ctx, m.Namespace, m.Key); err == nil {
			return existingResult(existing, m.SHA256)
		}
	} else {
		popts.SetMatchETagExcept("*")
	}
	for attempt := 0; ; attempt++ {
		_, err := s.core.PutObject(ctx, s.cfg.Bucket, name, bytes.NewReader(js), int64(len(js)), "", "", popts)
		if err == nil {
			s.usage.add(1, 0, int64(len(js)))
			return store.PutResult{Meta: m, Created: true}, nil
		}
		// 412: a record exists. 409: another conditional create of this key
		// is in flight (AWS answers so); the record may not be readable yet.
		status := minio.ToErrorResponse(err).StatusCode
		if status != http.StatusPreconditionFailed && status != http.StatusConflict {
			return store.PutResult{}, fmt.Errorf("put entry %s/%s: %w", m.Namespace, m.Key, s.fault("create entry record", name, err))
		}
		existing, rerr := s.readRecord(ctx, m.Namespace, m.Key)
		if rerr == nil {
			return existingResult(existing, m.SHA256)
		}
		if !errors.Is(rerr, store.ErrNotFound) || attempt >= 5 {
			return store.PutResult{}, fmt.Errorf("put entry %s/%s: %w", m.Namespace, m.Key, rerr)
		}
		time.Sleep(time.Duration(attempt+1) * 20 * time.Millisecond)
	}
}
