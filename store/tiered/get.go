package tiered

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	refilled, err := s.afterHotMiss(ctx, ns, key)
	switch {
	case err != nil:
		return store.Meta{}, nil, err
	case refilled:
		return s.hot.Get(ctx, ns, key, off, n)
	}
	return s.fetch(ctx, ns, key, off, n)
}

// afterHotMiss is what Get and Read do first when the hot tier lacks the
// entry: a quarantined entry is a miss (quarantine.go: never refilled from
// the shared tier), and one queued for upload (ModeBehind) is put back into
// the hot tier from the queue's copy (refilled).
func (s *Store) afterHotMiss(ctx context.Context, ns string, key store.Key) (refilled bool, err error) {
	if s.quarantined(ns, key) {
		return false, fmt.Errorf("get entry %s/%s: quarantined on this replica: %w", ns, key, store.ErrNotFound)
	}
	if s.q != nil {
		return s.q.refill(ctx, ns, key)
	}
	return false, nil
}

// quietReader is a tier that reads an entry without counting an access
// (*store.Badger).
type quietReader interface {
	Read(ctx context.Context, ns string, key store.Key) (store.Meta, io.ReadCloser, error)
}

// Read returns the whole entry as Get does, but counts no access and fills
// nothing: from the hot tier when it has the entry, else straight from the
// shared tier (verified, with no spool). An export reads every entry this
// way, so it leaves this replica's hot tier and its eviction order as they
// were. An entry queued for upload (ModeBehind) that the hot tier lost is
// put back from the queue first, as Get does.
func (s *Store) Read(ctx context.Context, ns string, key store.Key) (store.Meta, io.ReadCloser, error) {
	qr, ok := s.hot.(quietReader)
	if !ok {
		return s.Get(ctx, ns, key, 0, -1)
	}
	m, rc, err := qr.Read(ctx, ns, key)
	if err == nil {
		return m, rc, nil
	}
	if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrCorrupt) {
		return store.Meta{}, nil, err
	}
	refilled, err := s.afterHotMiss(ctx, ns, key)
	switch {
	case err != nil:
		return store.Meta{}, nil, err
	case refilled:
		return qr.Read(ctx, ns, key)
	}
	return s.direct(ctx, ns, key, 0, -1)
}

// fetch serves a hot miss through the key's spool, starting its download
// when no Get of the key has.
func (s *Store) fetch(ctx context.Context, ns string, key store.Key, off, n int64) (store.Meta, io.ReadCloser, error) {
	sp, owner, err := s.join(ns, key)
	if err != nil {
		return store.Meta{}, nil, err
	}
	if owner {
		s.startDownload(sp)
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
// when there is none; owner is true then, and the caller must start its
// download (startDownload). The map holds a spool until its fill has
// committed to the hot tier (or failed), so a Get that misses the map after
// that finds the entry in the hot tier: the download checks the hot tier
// again first, for a Get that missed it just before.
func (s *Store) join(ns string, key store.Key) (sp *spool, owner bool, err error) {
	id := ns + "/" + key.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, false, store.ErrClosed
	}
	if sp := s.spools[id]; sp != nil && sp.acquire() {
		s.n.collapsed.Add(1)
		return sp, false, nil
	}
	sp = newSpool(ns, key)
	sp.id = id
	sp.refs++ // the caller's
	s.spools[id] = sp
	s.wg.Add(1)
	return sp, true, nil
}

// forget removes sp from the map.
func (s *Store) forget(id string, sp *spool) {
	s.mu.Lock()
	if s.spools[id] == sp {
		delete(s.spools, id)
	}
	s.mu.Unlock()
}

// startDownload is the one fetch of a key, run by the Get that created its
// spool. Its head runs on that Get's goroutine: handing the first reader its
// bytes from another goroutine costs a wake-up (~80 µs on an idle 2-core
// VM, a tenth of a small read), so the head asks the shared tier for the
// entry itself and, for a small entry, reads it whole before sp.ready is
// closed. What is left (the copy of a large entry into the spool file, the
// fill of the hot tier) runs on a goroutine of its own. The creating Get
// waits for the shared tier's first answer even if its own context ends
// (the store's read timeouts bound it); every other Get of the key can
// leave at once.
func (s *Store) startDownload(sp *spool) {
	tail := s.downloadHead(sp)
	if tail == nil {
		s.forget(sp.id, sp)
		sp.unref()
		s.wg.Done()
		return
	}
	go func() {
		defer s.wg.Done()
		defer sp.unref()
		defer s.forget(sp.id, sp)
		tail()
	}()
}

// downloadHead starts the fetch of sp's entry and closes sp.ready; it
// returns what is left to do in the background, nil for nothing.
func (s *Store) downloadHead(sp *spool) (tail func()) {
	ctx := s.ctx
	if _, err := s.hot.Stat(ctx, sp.ns, sp.key); err == nil {
		sp.hot = true
		close(sp.ready)
		return nil
	}
	t0 := time.Now()
	m, rc, err := s.getShared(ctx, sp.ns, sp.key)
	if err != nil {
		s.sharedResult(EventSharedGet, time.Since(t0), 0, err)
		sp.err = err
		close(sp.ready)
		return nil
	}
	if !s.reserve(m.Size) {
		rc.Close()
		s.n.fillsSkipped.Add(1)
		s.emit(Event{Kind: EventFillSkipped, Namespace: sp.ns, Bytes: m.Size})
		sp.skip = true
		close(sp.ready)
		return nil
	}
	if m.Size <= memSpoolBytes {
		return s.downloadSmall(sp, m, rc, t0)
	}
	f, err := s.spoolFile()
	if err != nil {
		s.unreserve(m.Size)
		rc.Close()
		s.log.Warn("cannot create a spool file; reading the shared tier directly", "err", err)
		s.n.fillsSkipped.Add(1)
		sp.skip = true
		close(sp.ready)
		return nil
	}
	sp.release = func() { s.unreserve(m.Size); s.recycle(f, m.Size) }
	s.n.sharedFetches.Add(1)
	sp.m, sp.f = m, f
	close(sp.ready)
	return func() {
		var copied int64
		var err error
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
}

// getShared gets the whole entry from the shared tier under a guarded
// context (failfast.go), which the returned reader's Close releases.
func (s *Store) getShared(ctx context.Context, ns string, key store.Key) (store.Meta, io.ReadCloser, error) {
	g := s.guard(ctx)
	m, rc, err := s.shared.Get(g, ns, key, 0, -1)
	if err = g.disarm(err); err != nil {
		g.release()
		return store.Meta{}, nil, err
	}
	return m, &releaseOnClose{ReadCloser: rc, g: g}, nil
}

// memSpoolBytes is the largest entry spooled in memory rather than in a
// file: a small entry (most are inline in their record) is read whole,
// which the shared tier's reader verifies before it ends, before its
// readers are let in, so they read bytes that are all there and verified.
// The spool budget (Config.MaxSpoolBytes) counts these bytes too.
const memSpoolBytes = 64 << 10

// downloadSmall reads an entry of at most memSpoolBytes whole into sp's
// memory and returns the fill of the hot tier as the tail. The caller
// reserved m.Size.
func (s *Store) downloadSmall(sp *spool, m store.Meta, rc io.ReadCloser, t0 time.Time) (tail func()) {
	buf, err := io.ReadAll(io.LimitReader(rc, m.Size+1))
	rc.Close()
	if err == nil && int64(len(buf)) != m.Size {
		err = fmt.Errorf("shared tier sent %d of %d bytes: %w", len(buf), m.Size, store.ErrUnavailable)
	}
	s.sharedResult(EventSharedGet, time.Since(t0), int64(len(buf)), err)
	sp.release = func() { s.unreserve(m.Size) }
	if err != nil {
		s.log.Warn("fetch from the shared tier failed", "namespace", sp.ns, "key", sp.key.String(), "err", err)
		sp.err = err
		close(sp.ready)
		return nil
	}
	s.n.sharedFetches.Add(1)
	sp.m, sp.mem = m, buf
	sp.mu.Lock()
	sp.written, sp.done = m.Size, true
	sp.mu.Unlock()
	close(sp.ready)
	return func() { s.fillHot(sp) }
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
	var body io.Reader = io.NewSectionReader(sp.f, 0, m.Size)
	if sp.mem != nil {
		body = bytes.NewReader(sp.mem)
	}
	_, err := s.hot.Put(ctx, sp.ns, sp.key, &ctxReader{ctx: ctx, r: body}, store.PutOptions{
		Size: m.Size, SHA256: &sum, Backend: m.Backend, Name: m.Name, CompileSeconds: m.CompileSeconds,
		Writer: m.Writer, Run: m.Run, Labels: m.Labels, Components: m.Components,
	})
	if store.NeverFits(err) {
		// Larger than the whole hot tier (or its namespace's quota): served from the shared tier on
		// every read, as documented, which is no failure to warn about on
		// each one.
		s.n.fillsSkipped.Add(1)
		s.emit(Event{Kind: EventFillSkipped, Namespace: sp.ns, Bytes: m.Size})
		s.log.Debug("entry larger than the hot tier served from the shared tier", "namespace", sp.ns, "key", sp.key.String(), "bytes", m.Size)
		return
	}
	s.emit(Event{Kind: EventFill, Namespace: sp.ns, Duration: time.Since(t0), Bytes: m.Size, Err: err})
	if err != nil {
		s.n.fillFailures.Add(1)
		s.log.Log(ctx, hotFailureLevel(err), "entry fetched from the shared tier not kept in the hot tier", "namespace", sp.ns, "key", sp.key.String(), "err", err)
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
	m, rc, err := s.getShared(ctx, ns, key)
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

// hotFailureLevel is the level of a hot-tier write's failure beside a
// shared tier that has the entry: Warn, but Debug when the hot tier's data
// directory is gone or not writable, which the hot tier logs once itself
// and /readyz reports, so that every upload and every hot miss of a
// replica on a read-only disk does not log a line of its own.
func hotFailureLevel(err error) slog.Level {
	if errors.Is(err, store.ErrDirUnavailable) {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}
