package auth

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"
)

// Guard holds the current tokens file and swaps it atomically on Reload.
// It is safe for concurrent use: requests in flight keep the Tokens they
// started with.
type Guard struct {
	path string
	log  *slog.Logger
	cur  atomic.Pointer[Tokens]
}

// NewGuard loads the tokens file at path. A missing or malformed file is an
// error naming the file and, for a malformed one, the line.
func NewGuard(path string, log *slog.Logger) (*Guard, error) {
	if log == nil {
		log = slog.Default()
	}
	t, err := LoadFile(path)
	if err != nil {
		return nil, err
	}
	g := &Guard{path: path, log: log}
	g.cur.Store(t)
	g.warnIfEmpty(t)
	return g, nil
}

// warnIfEmpty warns when t grants nothing: every request is then refused.
// Such a file is allowed (removing the last token line is how its token
// is revoked) but is more often a mistake, e.g. a file truncated by a
// config tool before a SIGHUP.
func (g *Guard) warnIfEmpty(t *Tokens) {
	if t.Len() == 0 && t.anonymous == nil {
		g.log.Warn("tokens file has no token lines and no anonymous rule: every request is refused with 401 until one is added (cachesvc token new) and the server gets SIGHUP",
			"file", g.path)
	}
}

// Tokens returns the tokens in force.
func (g *Guard) Tokens() *Tokens { return g.cur.Load() }

// Authorize checks a request against the tokens in force; see
// Tokens.Authorize.
func (g *Guard) Authorize(secret, ns string, need Scope) (Identity, error) {
	return g.cur.Load().Authorize(secret, ns, need)
}

// Authenticate identifies a request for a route open to any known token;
// see Tokens.Identify.
func (g *Guard) Authenticate(secret string) (Identity, error) {
	return g.cur.Load().Identify(secret)
}

// Reload re-reads the tokens file. On success the new tokens replace the
// old ones at once; on failure the old ones stay in force, the error is
// logged and returned.
func (g *Guard) Reload() error {
	t, err := LoadFile(g.path)
	if err != nil {
		g.log.Error("tokens file reload failed; keeping the previous tokens", "file", g.path, "err", err)
		return err
	}
	g.cur.Store(t)
	g.log.Info("tokens file reloaded", "file", g.path, "tokens", t.Len(), "anonymous", t.anonymous != nil)
	g.warnIfEmpty(t)
	return nil
}

// ReloadOn calls Reload each time a value arrives on sig (typically
// SIGHUP from signal.Notify) until ctx ends or sig is closed. done, if not
// nil, receives each Reload's result; it must be drained.
func (g *Guard) ReloadOn(ctx context.Context, sig <-chan os.Signal, done chan<- error) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-sig:
			if !ok {
				return
			}
			err := g.Reload()
			if done != nil {
				done <- err
			}
		}
	}
}
