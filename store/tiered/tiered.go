// Package tiered composes a hot tier (each replica's Badger) in front of a
// shared tier (the fleet's S3 bucket) into one store.Store: perkeep's
// proxycache shape, a wrapper satisfying the interface it wraps.
//
// # Reads
//
// Get serves the hot tier when it has the entry. On a hot miss it fetches
// the whole entry from the shared tier once per key per process: concurrent
// Gets of one key collapse into one flight (singleflight), which checks the
// hot tier again before fetching (an earlier flight may have filled it just
// after this Get missed). The caller that started the flight streams the
// shared tier's bytes as they arrive while the same bytes fill the hot
// tier (a tee); the others wait for the flight and then read the hot tier.
// The hot tier's Put is given the entry's size and SHA-256, so bytes that
// fail their digest are never kept, and the shared tier's reader fails
// before its last byte on a mismatch, so they are never served complete
// either. A ranged Get on a hot miss waits for the fill and serves the range
// from the hot tier, where every chunk is verified. When the hot tier cannot
// hold an entry (too large, full), it is served from the shared tier.
//
// The streaming caller sets the pace of the fill: the waiters of a flight
// wait for it. If it stops reading (Close before the end), the fill goes on
// in the background.
//
// # Writes
//
// In ModeThrough (the only mode so far) Put streams the body to the shared
// tier and, through a tee, to the hot tier, whose Put is held before its
// end until the shared tier's Put has returned: the hot tier commits only
// entries the shared tier has (so replicas never disagree), and Put returns
// success only once the shared tier has the entry, durably. With the shared
// tier down, Put fails with an error wrapping store.ErrUnavailable and
// reads of hot entries go on working.
package tiered

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"

	"golang.org/x/sync/singleflight"

	"github.com/cachesvc/cachesvc/store"
)

// Mode is a write mode.
type Mode string

// ModeThrough acknowledges a Put once the shared tier has it.
const ModeThrough Mode = "through"

// Config configures a tiered store.
type Config struct {
	// Hot is the local tier (Badger), consulted first and filled on reads.
	// Required; the tiered store closes it.
	Hot store.Store
	// Shared is the durable tier every replica uses (S3). Required; the
	// tiered store closes it.
	Shared store.Store
	// Mode is the write mode; "" means ModeThrough.
	Mode Mode
	// Logger receives the store's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Stats counts what the tiers did, for metrics. Fields are cumulative.
type Stats struct {
	// HotHits are Gets served by the hot tier.
	HotHits int64
	// SharedFetches are entries fetched from the shared tier (one per
	// flight, however many Gets it served).
	SharedFetches int64
	// Collapsed are Gets that waited for another Get's flight.
	Collapsed int64
	// Misses are Gets that neither tier could serve (store.ErrNotFound).
	Misses int64
	// FillFailures are fetched entries the hot tier did not keep (corrupt,
	// too large, full, hot tier errors).
	FillFailures int64
	// HotPutFailures are Puts stored in the shared tier but not the hot one.
	HotPutFailures int64
}

type counters struct {
	hotHits, sharedFetches, collapsed, misses, fillFailures, hotPutFailures atomic.Int64
}

// Store is a store.Store of two tiers. It is safe for concurrent use.
type Store struct {
	hot, shared store.Store
	log         *slog.Logger
	flight      singleflight.Group
	n           counters
}

var _ store.Store = (*Store)(nil)

// New returns a tiered store over cfg.Hot and cfg.Shared.
func New(cfg Config) (*Store, error) {
	if cfg.Hot == nil || cfg.Shared == nil {
		return nil, fmt.Errorf("new tiered store: %w: hot and shared tiers are required", store.ErrInvalid)
	}
	switch cfg.Mode {
	case "", ModeThrough:
	default:
		return nil, fmt.Errorf("new tiered store: %w: write mode %q (only %q so far)", store.ErrInvalid, cfg.Mode, ModeThrough)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Store{hot: cfg.Hot, shared: cfg.Shared, log: cfg.Logger}, nil
}

// Stats returns the counters.
func (s *Store) Stats() Stats {
	return Stats{
		HotHits: s.n.hotHits.Load(), SharedFetches: s.n.sharedFetches.Load(), Collapsed: s.n.collapsed.Load(),
		Misses: s.n.misses.Load(), FillFailures: s.n.fillFailures.Load(), HotPutFailures: s.n.hotPutFailures.Load(),
	}
}

// Put stores the entry in the shared tier and then the hot tier (see the
// package doc). Its result and error are the shared tier's: a Put the hot
// tier fails is still a success (counted in Stats.HotPutFailures); a Put
// the shared tier fails stores nothing in either.
func (s *Store) Put(ctx context.Context, ns string, key store.Key, r io.Reader, opts store.PutOptions) (store.PutResult, error) {
	pr, pw := io.Pipe()
	hold := &holdEOF{r: pr, release: make(chan error, 1)}
	hotDone := make(chan error, 1)
	go func() {
		_, err := s.hot.Put(ctx, ns, key, hold, opts)
		pr.CloseWithError(err) // unblocks the tee if the hot Put ended early
		hotDone <- err
	}()
	tee := &hotTee{r: r, w: pw}
	res, err := s.shared.Put(ctx, ns, key, tee, opts)
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
		return res, fmt.Errorf("put entry %s/%s: shared tier: %w", ns, key, err)
	}
	if herr != nil {
		s.n.hotPutFailures.Add(1)
		s.log.Warn("entry stored in the shared tier but not the hot tier", "namespace", ns, "key", key.String(), "err", herr)
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

// Stat returns the hot tier's metadata, or the shared tier's on a hot miss
// (without filling the hot tier).
func (s *Store) Stat(ctx context.Context, ns string, key store.Key) (store.Meta, error) {
	m, err := s.hot.Stat(ctx, ns, key)
	if err == nil || !errors.Is(err, store.ErrNotFound) {
		return m, err
	}
	return s.shared.Stat(ctx, ns, key)
}

// Delete removes the entry from both tiers. A miss (in both) returns
// store.ErrNotFound.
func (s *Store) Delete(ctx context.Context, ns string, key store.Key) error {
	serr := s.shared.Delete(ctx, ns, key)
	if serr != nil && !errors.Is(serr, store.ErrNotFound) {
		return fmt.Errorf("delete entry %s/%s: shared tier: %w", ns, key, serr)
	}
	herr := s.hot.Delete(ctx, ns, key)
	if herr != nil && !errors.Is(herr, store.ErrNotFound) {
		return fmt.Errorf("delete entry %s/%s: hot tier: %w", ns, key, herr)
	}
	if serr != nil && herr != nil {
		return serr
	}
	return nil
}

// Walk walks the shared tier, which holds every entry (the hot tier holds
// those this replica used lately). On S3 that is a request per entry.
func (s *Store) Walk(ctx context.Context, ns string, fn func(store.Meta) bool) error {
	return s.shared.Walk(ctx, ns, fn)
}

// Usage returns the shared tier's entry, blob and byte counts with the hot
// tier's limit and evictions, and both tiers' integrity failures.
func (s *Store) Usage() store.Usage {
	h, sh := s.hot.Usage(), s.shared.Usage()
	sh.MaxBytes = h.MaxBytes
	sh.Evictions = h.Evictions
	sh.IntegrityFailures += h.IntegrityFailures
	return sh
}

// Close closes both tiers.
func (s *Store) Close() error {
	return errors.Join(s.hot.Close(), s.shared.Close())
}
