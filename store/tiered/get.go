package tiered

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cachesvc/cachesvc/store"
)

// Get returns the entry from the hot tier, or on a hot miss from the
// shared tier through the key's one spool (see the package doc). A hot read
// that fails with store.ErrCorrupt has quarantined the hot copy, so the
// next Get fetches the entry afresh from the shared tier.
func (s *Store) Get(ctx context.Context, ns string, key store.Key, off, n int64) (store.Meta, io.ReadCloser, error) {
	m, rc, err := s.hot.Get(ctx, ns, key, off, n)
	if err == nil {
		s.n.hotHits.Add(1)
		return m, rc, nil
	}
	if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrCorrupt) {
		return store.Meta{}, nil, err // invalid arguments, closed, a broken hot tier
	}
	if s.q != nil {
		if ok, err := s.q.refill(ctx, ns, key); ok {
			if err != nil {
				return store.Meta{}, nil, err
			}
			return s.hot.Get(ctx, ns, key, off, n)
		}
	}
	return s.fetch(ctx, ns, key, off, n)
}

// fetch serves a hot miss through the key's spool, starting its download
// when no Get of the key has.
func (s *Store) fetch(ctx context.Context, ns string, key store.Key, off, n int64) (store.Meta, io.ReadCloser, error) {
	sp, err := s.join(ns, key)
	if err != nil {
		return store.Meta{}, nil, err
	}
	select {
	case <-sp.ready:
	case <-ctx.Done():
		sp.unref()
		return store.Meta{}, nil, fmt.Errorf("get entry %s/%s: %w", ns, key, ctx.Err())
	}
	switch {
	case sp.err != nil:
		sp.unref()
		if errors.Is(sp.err, store.ErrNotFound) {
			s.n.misses.Add(1)
			return store.Meta{}, nil, sp.err
		}
		return store.Meta{}, nil, fmt.Errorf("get entry %s/%s: shared tier: %w", ns, key, sp.err)
	case sp.hot:
		sp.unref()
		return s.afterFill(ctx, ns, key, off, n)
	case sp.skip:
		sp.unref()
		return s.direct(ctx, ns, key, off, n)
	}
	m := sp.m
	start, end := min(max(off, 0), m.Size), m.Size
	if n >= 0 && n < end-start {
		end = start + n
	}
	if start != 0 || end != m.Size {
		// A range is served only from verified bytes: wait for the
		// download's end (the digest check).
		if _, _, err := sp.wait(m.Size); err != nil {
			sp.unref()
			return store.Meta{}, nil, fmt.Errorf("get entry %s/%s: %w", ns, key, err)
		}
	}
	return m, &follower{sp: sp, off: start, end: end}, nil
}

// join returns the key's spool with a reference for the caller, creating it
// and starting its download when there is none. The map holds a spool until
// its fill has committed to the hot tier (or failed), so a Get that misses
// the map after that finds the entry in the hot tier: the download checks
// the hot tier again first, for a Get that missed it just before.
func (s *Store) join(ns string, key store.Key) (*spool, error) {
	id := ns + "/" + key.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, store.ErrClosed
	}
	if sp := s.spools[id]; sp != nil && sp.acquire() {
		s.n.collapsed.Add(1)
		return sp, nil
	}
	sp := newSpool(ns, key)
	sp.refs++ // the caller's
	s.spools[id] = sp
	s.wg.Add(1)
	go s.download(id, sp)
	return sp, nil
}

// forget removes sp from the map.
func (s *Store) forget(id string, sp *spool) {
	s.mu.Lock()
	if s.spools[id] == sp {
		delete(s.spools, id)
	}
	s.mu.Unlock()
}

// download is the one fetch of a key: it fills sp from the shared tier and
// then the hot tier from sp.
func (s *Store) download(id string, sp *spool) {
	defer s.wg.Done()
	defer sp.unref()
	defer s.forget(id, sp)
	ctx := s.ctx
	if _, err := s.hot.Stat(ctx, sp.ns, sp.key); err == nil {
		sp.hot = true
		close(sp.ready)
		return
	}
	t0 := time.Now()
	m, rc, err := s.shared.Get(ctx, sp.ns, sp.key, 0, -1)
	if err != nil {
		s.sharedResult(EventSharedGet, time.Since(t0), 0, err)
		sp.err = err
		close(sp.ready)
		return
	}
	if !s.reserve(m.Size) {
		rc.Close()
		s.n.fillsSkipped.Add(1)
		s.emit(Event{Kind: EventFillSkipped, Namespace: sp.ns, Bytes: m.Size})
		sp.skip = true
		close(sp.ready)
		return
	}
	f, err := s.spoolFile()
	if err != nil {
		s.unreserve(m.Size)
		rc.Close()
		s.log.Warn("cannot create a spool file; reading the shared tier directly", "err", err)
		s.n.fillsSkipped.Add(1)
		sp.skip = true
		close(sp.ready)
		return
	}
	sp.release = func() { s.unreserve(m.Size); s.recycle(f, m.Size) }
	s.n.sharedFetches.Add(1)
	sp.m, sp.f = m, f
	close(sp.ready)
	var copied int64
	if wt, ok := rc.(io.WriterTo); ok {
		copied, err = wt.WriteTo(sp)
	} else {
		copied, err = io.Copy(sp, rc)
	}
	if err == nil && copied != m.Size {
		err = fmt.Errorf("shared tier sent %d of %d bytes: %w", copied, m.Size, store.ErrUnavailable)
	}
	rc.Close()
	s.sharedResult(EventSharedGet, time.Since(t0), copied, err)
	sp.end(err)
	if err != nil {
		s.log.Warn("fetch from the shared tier failed", "namespace", sp.ns, "key", sp.key.String(), "err", err)
		return
	}
	s.fillHot(sp)
}

// fillHot puts the verified spool into the hot tier, at most
// Config.MaxFills at a time, each within Config.FillTimeout. The hot tier
// is given the size and SHA-256 and checks them again.
func (s *Store) fillHot(sp *spool) {
	select {
	case s.fills <- struct{}{}:
	case <-s.ctx.Done():
		return
	}
	defer func() { <-s.fills }()
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.FillTimeout)
	defer cancel()
	t0 := time.Now()
	m := sp.m
	sum := m.SHA256
	_, err := s.hot.Put(ctx, sp.ns, sp.key, &ctxReader{ctx: ctx, r: io.NewSectionReader(sp.f, 0, m.Size)}, store.PutOptions{
		Size: m.Size, SHA256: &sum, Backend: m.Backend, Name: m.Name, CompileSeconds: m.CompileSeconds,
		Writer: m.Writer, Run: m.Run, Labels: m.Labels, Components: m.Components,
	})
	s.emit(Event{Kind: EventFill, Namespace: sp.ns, Duration: time.Since(t0), Bytes: m.Size, Err: err})
	if err != nil {
		s.n.fillFailures.Add(1)
		s.log.Warn("entry fetched from the shared tier not kept in the hot tier", "namespace", sp.ns, "key", sp.key.String(), "err", err)
	}
}

// ctxReader fails once ctx ends: a stalled fill gives up at its timeout
// even if the hot tier's Put checks its context only between chunks.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, fmt.Errorf("fill hot tier: %w", err)
	}
	return c.r.Read(p)
}

// Idle spool files kept for reuse: at most idleSpools, each of at most
// idleSpoolMax bytes (so at most 256 MiB of disk held idle).
const (
	idleSpools   = 4
	idleSpoolMax = 64 << 20
)

// spoolFile returns an idle spool file, or creates an unlinked one in the
// spool directory.
func (s *Store) spoolFile() (*os.File, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		f := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return f, nil
	}
	s.mu.Unlock()
	f, err := os.CreateTemp(s.cfg.SpoolDir, "spool-*")
	if err != nil {
		return nil, fmt.Errorf("create spool file: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("unlink spool file: %w", err)
	}
	return f, nil
}

// recycle keeps a spool file for reuse, or closes it.
func (s *Store) recycle(f *os.File, size int64) {
	s.mu.Lock()
	if !s.closing && len(s.idle) < idleSpools && size <= idleSpoolMax {
		s.idle = append(s.idle, f)
		f = nil
	}
	s.mu.Unlock()
	if f != nil {
		_ = f.Close()
	}
}

// reserve takes size bytes of the spool budget, or reports that they do not
// fit.
func (s *Store) reserve(size int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spoolBytes+size > s.cfg.MaxSpoolBytes {
		return false
	}
	s.spoolBytes += size
	return true
}

func (s *Store) unreserve(size int64) {
	s.mu.Lock()
	s.spoolBytes -= size
	s.mu.Unlock()
}

// afterFill serves a Get whose key the hot tier has (or had: it may have
// evicted it since), else from the shared tier directly.
func (s *Store) afterFill(ctx context.Context, ns string, key store.Key, off, n int64) (store.Meta, io.ReadCloser, error) {
	if m, rc, err := s.hot.Get(ctx, ns, key, off, n); err == nil {
		return m, rc, nil
	}
	return s.direct(ctx, ns, key, off, n)
}

// direct serves a Get from the shared tier without a spool or a fill (the
// spool budget is spent). A ranged read is not verified by the shared tier,
// so a range is read whole, verified, and cut here.
func (s *Store) direct(ctx context.Context, ns string, key store.Key, off, n int64) (store.Meta, io.ReadCloser, error) {
	t0 := time.Now()
	m, rc, err := s.shared.Get(ctx, ns, key, 0, -1)
	s.sharedResult(EventSharedGet, time.Since(t0), 0, err)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			s.n.misses.Add(1)
			return store.Meta{}, nil, err
		}
		return store.Meta{}, nil, fmt.Errorf("get entry %s/%s: shared tier: %w", ns, key, err)
	}
	s.n.sharedFetches.Add(1)
	start, end := min(max(off, 0), m.Size), m.Size
	if n >= 0 && n < end-start {
		end = start + n
	}
	if start == 0 && end == m.Size {
		return m, rc, nil
	}
	return m, &rangeOf{rc: rc, skip: start, left: end - start}, nil
}

// rangeOf serves bytes [skip, skip+left) of a whole, verifying reader: it
// reads to the end, so the digest is checked before the range's last byte
// is delivered.
type rangeOf struct {
	rc   io.ReadCloser
	skip int64
	left int64
}

func (r *rangeOf) Read(p []byte) (int, error) {
	if r.skip > 0 {
		if _, err := io.CopyN(io.Discard, r.rc, r.skip); err != nil {
			return 0, err
		}
		r.skip = 0
	}
	if r.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.rc.Read(p)
	r.left -= int64(n)
	if r.left == 0 && (err == nil || err == io.EOF) {
		// Hold the range's end back until the rest is read and verified.
		if _, derr := io.Copy(io.Discard, r.rc); derr != nil {
			return 0, derr
		}
		return n, io.EOF
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (r *rangeOf) Close() error { return r.rc.Close() }
