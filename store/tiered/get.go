package tiered

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/cachesvc/cachesvc/store"
)

// Get returns the entry from the hot tier, or on a hot miss from the shared
// tier through one flight per key (see the package doc). A hot read that
// fails with store.ErrCorrupt has quarantined the hot copy, so the next Get
// fetches the entry afresh from the shared tier.
func (s *Store) Get(ctx context.Context, ns string, key store.Key, off, n int64) (store.Meta, io.ReadCloser, error) {
	m, rc, err := s.hot.Get(ctx, ns, key, off, n)
	if err == nil {
		s.n.hotHits.Add(1)
		return m, rc, nil
	}
	if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrCorrupt) {
		return store.Meta{}, nil, err // invalid arguments, closed, a broken hot tier
	}
	return s.fetch(ctx, ns, key, off, n)
}

// start is what a flight gives the Get that started it: the entry with the
// reader of the tee, the hot tier having it already (hot), or the shared
// tier's error.
type start struct {
	m   store.Meta
	r   io.ReadCloser
	hot bool
	err error
}

// outcome is a flight's result for the Gets that waited on it: the shared
// tier's error, if any. Whether the hot tier kept the entry shows by asking
// it.
type outcome struct{ err error }

// fetch gets the entry through the key's flight.
func (s *Store) fetch(ctx context.Context, ns string, key store.Key, off, n int64) (store.Meta, io.ReadCloser, error) {
	ready := make(chan start, 1) // only this Get's own flight sends on it
	ch := s.flight.DoChan(ns+"/"+key.String(), func() (any, error) {
		return s.fill(ctx, ns, key, ready), nil
	})
	select {
	case st := <-ready:
		return s.lead(ctx, ns, key, off, n, st, ch)
	case res := <-ch:
		// The flight may be this Get's own that ended without streaming
		// (an error, or the hot tier had the entry by then).
		select {
		case st := <-ready:
			return s.lead(ctx, ns, key, off, n, st, ch)
		default:
		}
		s.n.collapsed.Add(1)
		return s.afterFill(ctx, ns, key, off, n, res.Val.(outcome))
	}
}

// lead answers the Get that started the flight.
func (s *Store) lead(ctx context.Context, ns string, key store.Key, off, n int64, st start, ch <-chan singleflight.Result) (store.Meta, io.ReadCloser, error) {
	switch {
	case st.err != nil:
		return s.afterFill(ctx, ns, key, off, n, outcome{st.err})
	case st.hot:
		return s.afterFill(ctx, ns, key, off, n, outcome{})
	case off == 0 && n < 0:
		return st.m, st.r, nil // stream the tee
	}
	// A range: let the fill finish (Close drains the tee in the background)
	// and serve the range from the hot tier's verified chunks.
	st.r.Close()
	res := <-ch
	return s.afterFill(ctx, ns, key, off, n, res.Val.(outcome))
}

// afterFill serves a Get once its key's flight has ended: from the hot tier
// if the flight filled it, else from the shared tier directly (the hot tier
// could not keep the entry: too large, full, or it failed its digest, in
// which case the shared tier has quarantined it and answers a miss).
func (s *Store) afterFill(ctx context.Context, ns string, key store.Key, off, n int64, res outcome) (store.Meta, io.ReadCloser, error) {
	if res.err != nil {
		if errors.Is(res.err, store.ErrNotFound) {
			s.n.misses.Add(1)
			return store.Meta{}, nil, res.err
		}
		return store.Meta{}, nil, fmt.Errorf("get entry %s/%s: shared tier: %w", ns, key, res.err)
	}
	if m, rc, err := s.hot.Get(ctx, ns, key, off, n); err == nil {
		return m, rc, nil
	}
	m, rc, err := s.shared.Get(ctx, ns, key, off, n)
	if errors.Is(err, store.ErrNotFound) {
		s.n.misses.Add(1)
	}
	return m, rc, err
}

// fill is a flight: it checks the hot tier again (a flight that ended just
// before this one began may have filled it), then gets the whole entry from
// the shared tier and puts it into the hot tier while the flight's leader
// reads the same bytes through the tee. It uses a context of its own: the
// waiters must not fail because the leader's request ended.
func (s *Store) fill(ctx context.Context, ns string, key store.Key, ready chan<- start) outcome {
	fctx := context.WithoutCancel(ctx)
	if _, err := s.hot.Stat(fctx, ns, key); err == nil {
		ready <- start{hot: true}
		return outcome{}
	}
	m, rc, err := s.shared.Get(fctx, ns, key, 0, -1)
	if err != nil {
		ready <- start{err: err}
		return outcome{err: err}
	}
	s.n.sharedFetches.Add(1)
	pr, pw := io.Pipe()
	tee := &fillTee{src: rc, w: pw, filled: make(chan struct{})}
	defer close(tee.filled)
	ready <- start{m: m, r: tee}
	sum := m.SHA256
	_, err = s.hot.Put(fctx, ns, key, pr, store.PutOptions{
		Size: m.Size, SHA256: &sum, Backend: m.Backend, Name: m.Name, CompileSeconds: m.CompileSeconds,
		Writer: m.Writer, Run: m.Run, Labels: m.Labels, Components: m.Components,
	})
	if err != nil {
		pr.CloseWithError(fmt.Errorf("hot tier refused the entry: %w", err)) // the tee stops copying
		s.n.fillFailures.Add(1)
		s.log.Warn("entry fetched from the shared tier not kept in the hot tier", "namespace", ns, "key", key.String(), "err", err)
	}
	return outcome{}
}

// fillTee is the flight leader's reader: the shared tier's bytes, each
// also written to the hot tier's Put (the pipe holds nothing: a write waits
// for the Put to take it). The shared tier's reader fails before its last
// byte on a digest mismatch, and the error reaches the hot Put too, which
// then keeps nothing. Once the hot Put has ended it only reads.
type fillTee struct {
	src io.ReadCloser
	w   *io.PipeWriter

	filled chan struct{} // closed when the hot Put has returned

	mu      sync.Mutex // Read and Close's drain
	hotGone bool
	ended   bool
	closed  bool
}

// Read implements io.Reader.
func (t *fillTee) Read(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, errors.New("read entry: reader is closed")
	}
	return t.read(p)
}

// WriteTo writes the rest of the entry to w and to the hot tier in the
// shared tier's reader's own buffers (io.Copy and bufio.Reader.WriteTo
// prefer it to Read), sparing a copy and many small pipe writes.
func (t *fillTee) WriteTo(w io.Writer) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, errors.New("read entry: reader is closed")
	}
	wt, ok := t.src.(io.WriterTo)
	if !ok {
		return io.Copy(w, struct{ io.Reader }{readerFunc(t.read)})
	}
	tw := &teeWriter{t: t, w: w}
	n, err := wt.WriteTo(tw)
	if err == nil {
		err = io.EOF // WriteTo's nil is the end of the entry
	}
	t.ended = true
	if err == io.EOF {
		t.w.Close()
		return n, tw.err
	}
	t.w.CloseWithError(err)
	if tw.err != nil {
		return n, tw.err
	}
	return n, err
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// teeWriter writes to the caller and, while it takes them, the hot tier.
type teeWriter struct {
	t   *fillTee
	w   io.Writer
	err error // the caller's write error
}

func (tw *teeWriter) Write(p []byte) (int, error) {
	if !tw.t.hotGone {
		if _, err := tw.t.w.Write(p); err != nil {
			tw.t.hotGone = true
		}
	}
	n, err := tw.w.Write(p)
	if err != nil {
		tw.err = err
	}
	return n, err
}

func (t *fillTee) read(p []byte) (int, error) {
	n, err := t.src.Read(p)
	if n > 0 && !t.hotGone {
		if _, werr := t.w.Write(p[:n]); werr != nil {
			t.hotGone = true
		}
	}
	if err != nil {
		t.ended = true
		if err == io.EOF {
			t.w.Close()
		} else {
			t.w.CloseWithError(err)
		}
	}
	return n, err
}

// Close ends the reader. Before the end of the entry, the rest is read in
// the background so that the fill completes for the flight's waiters;
// after it, Close waits for the hot tier's Put to return.
func (t *fillTee) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	if t.ended || t.hotGone {
		t.mu.Unlock()
		t.w.CloseWithError(errors.New("reader closed before the end"))
		err := t.src.Close()
		// After a whole read, return once the hot tier has committed the
		// entry (milliseconds), so that the next Get is a hot hit.
		<-t.filled
		return err
	}
	go func() {
		defer t.mu.Unlock()
		buf := make([]byte, 256<<10)
		for {
			if _, err := t.read(buf); err != nil || t.hotGone {
				break
			}
		}
		t.w.CloseWithError(errors.New("fill stopped"))
		_ = t.src.Close()
	}()
	return nil
}
