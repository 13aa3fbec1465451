package tiered

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cachesvc/cachesvc/store"
)

// Put stores the entry in the shared tier and then the hot tier (see the
// package doc). Its result and error are the shared tier's: a Put the hot
// tier fails is still a success (counted in Stats.HotPutFailures); a Put
// the shared tier fails stores nothing in either.
func (s *Store) Put(ctx context.Context, ns string, key store.Key, r io.Reader, opts store.PutOptions) (store.PutResult, error) {
	if err := s.refuseQuarantined(ns, key, opts); err != nil { // quarantine.go
		return store.PutResult{}, err
	}
	if s.q != nil {
		return s.q.put(ctx, ns, key, r, opts)
	}
	pr, pw := io.Pipe()
	hold := &holdEOF{r: pr, release: make(chan error, 1)}
	hotDone := make(chan error, 1)
	go func() {
		_, err := s.hot.Put(ctx, ns, key, hold, opts)
		pr.CloseWithError(err) // unblocks the tee if the hot Put ended early
		hotDone <- err
	}()
	tee := &hotTee{r: r, w: pw}
	t0 := time.Now()
	g := s.guard(ctx) // failfast.go
	res, err := s.shared.Put(g, ns, key, tee, opts)
	err = g.disarm(err)
	g.release()
	s.sharedResult(EventSharedPut, time.Since(t0), res.Meta.Size, err)
	var release error
	switch {
	case err != nil:
		release = fmt.Errorf("shared tier refused the entry: %w", err)
	case !tee.eof:
		release = errors.New("shared tier did not read the body to its end")
	}
	if release != nil {
		pw.CloseWithError(release)
	} else {
		pw.Close()
	}
	hold.release <- release // buffered: the hot Put may have ended already
	herr := <-hotDone
	if err != nil {
		// The shared tier's error begins "put entry ns/key" itself.
		return res, fmt.Errorf("shared tier: %w", err)
	}
	if herr != nil {
		s.n.hotPutFailures.Add(1)
		s.log.Log(ctx, hotFailureLevel(herr), "entry stored in the shared tier but not the hot tier", "namespace", ns, "key", key.String(), "err", herr)
	}
	return res, nil
}

// hotTee passes a Put's body to the shared tier and copies it into the hot
// tier's pipe; once the hot Put has ended (failed) it stops copying but
// keeps reading, since the shared tier decides.
type hotTee struct {
	r      io.Reader
	w      *io.PipeWriter
	hotErr error // the hot Put ended: stop copying
	eof    bool
}

// Read implements io.Reader.
func (t *hotTee) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 && t.hotErr == nil {
		// Blocks until the hot Put has taken the bytes: the pipe holds
		// nothing, so memory stays bounded.
		if _, werr := t.w.Write(p[:n]); werr != nil {
			t.hotErr = werr
		}
	}
	switch {
	case err == io.EOF:
		t.eof = true
	case err != nil:
		t.w.CloseWithError(err)
	}
	return n, err
}

// holdEOF passes r through but holds its end (EOF or error) until release
// says whether the shared tier stored the entry: nil lets the hot tier's Put
// see EOF and commit, an error makes it fail.
type holdEOF struct {
	r       io.Reader
	release chan error
	done    bool
	err     error
}

// Read implements io.Reader.
func (h *holdEOF) Read(p []byte) (int, error) {
	if h.done {
		return 0, h.err
	}
	n, err := h.r.Read(p)
	if err == io.EOF {
		if rerr := <-h.release; rerr != nil {
			h.done, h.err = true, rerr
			return n, rerr
		}
		h.done, h.err = true, io.EOF
	} else if err != nil {
		h.done, h.err = true, err
	}
	return n, err
}
