package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/resp"
	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/stats/report"
)

// redisOptions are serve's flags for the Redis-protocol listener (stock
// torch's and Triton's remote caches).
type redisOptions struct {
	Addr        string
	Namespace   string
	MaxValue    int64
	MaxConns    int
	MaxBuffered int64
	IdleTimeout time.Duration
}

// register defines the flags on fs.
func (o *redisOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.Addr, "redis-addr", "", "`host:port` of a Redis-protocol listener for stock torch and Triton (TORCHINDUCTOR_REDIS_URL=redis://host:port); empty = off")
	fs.StringVar(&o.Namespace, "redis-namespace", resp.DefaultNamespace, "`namespace` the Redis-protocol listener stores torch's and Triton's entries in")
	sizeVar(fs, &o.MaxValue, "redis-max-value", resp.DefaultMaxValueBytes, "largest value a Redis SET may carry (held in memory while it arrives); at most --max-entry-size")
	fs.IntVar(&o.MaxConns, "redis-max-conns", resp.DefaultMaxConns, "open Redis-protocol connections at once; one more is refused with \"ERR max number of clients reached\"")
	positiveSizeVar(fs, &o.MaxBuffered, "redis-max-buffered", resp.DefaultMaxBufferedBytes, "memory all Redis-protocol connections may hold for commands arriving; past it a connection gets an error to retry")
	durationVar(fs, &o.IdleTimeout, "redis-idle-timeout", resp.DefaultIdleTimeout, 0, "0 (never close an idle connection) or more, e.g. 10m", "close a Redis-protocol connection idle this long (0 = never; negative is refused)")
}

// validate checks the flags; maxEntry is --max-entry-size (0 = none).
func (o *redisOptions) validate(maxEntry int64) error {
	if o.Addr == "" {
		return nil
	}
	if o.MaxValue <= 0 {
		return usagef("--redis-max-value must be positive")
	}
	if maxEntry > 0 && o.MaxValue > maxEntry {
		o.MaxValue = maxEntry // no SET may store more than an upload
	}
	if o.MaxConns <= 0 {
		return usagef("--redis-max-conns must be positive")
	}
	if need := resp.CommandBytes(resp.Config{MaxValueBytes: o.MaxValue}); o.MaxBuffered > 0 && o.MaxBuffered < need {
		return usagef("--redis-max-buffered %s cannot hold one SET of the largest value (--redis-max-value %s, at most --max-entry-size, plus its key): raise --redis-max-buffered or lower --redis-max-value",
			report.Bytes(o.MaxBuffered), report.Bytes(o.MaxValue))
	}
	if err := cachekey.ValidateNamespace(o.Namespace); err != nil {
		return usagef("--redis-namespace: %s", err)
	}
	return nil
}

// redisListener is the started listener: serve shuts it down with the
// HTTP server.
type redisListener struct {
	srv  *resp.Server
	done chan error
	once sync.Once
}

// listen binds the listener's address, before the store opens, so that a
// taken port fails serve at once. It returns nil when --redis-addr is off.
func (o *redisOptions) listen(tokens, insecureNoAuth bool) (net.Listener, error) {
	if o.Addr == "" {
		return nil, nil
	}
	if err := auth.CheckExposure(o.Addr, tokens, insecureNoAuth); err != nil {
		return nil, fmt.Errorf("--redis-addr: %w", err)
	}
	return listen("--redis-addr", o.Addr) // listen.go
}

// start serves RESP on ln beside srv: the same store, statistics, tokens,
// TLS, timeouts and metrics registry.
func (o *redisOptions) start(ln net.Listener, srv *api.Server, acfg api.Config, keyer *keying.Keyer, logger *slog.Logger) (*redisListener, error) {
	if keyer == nil {
		return nil, errors.New("--redis-addr needs the key plugins (the pt2 plugin maps Redis keys)")
	}
	// The operator named the namespace, as --namespaces does: torch's
	// first GETs miss before its first SET, and they count under it.
	if acfg.Stats != nil {
		acfg.Stats.AdmitNamespace(o.Namespace)
	}
	rs, err := resp.New(resp.Config{
		Store:            acfg.Store,
		Outcomes:         srv.Outcomes(),
		Keyer:            keyer,
		Auth:             acfg.Auth,
		TLS:              acfg.TLS,
		Registry:         srv.Registry(),
		Logger:           logger,
		Version:          acfg.Version,
		Namespace:        o.Namespace,
		MaxValueBytes:    o.MaxValue,
		MaxConns:         o.MaxConns,
		MaxBufferedBytes: o.MaxBuffered,
		IdleTimeout:      idleOrNever(o.IdleTimeout),
		ReadTimeout:      acfg.Limits.ReadTimeout,
		WriteTimeout:     acfg.Limits.WriteTimeout,
		MinTransferRate:  acfg.Limits.MinTransferRate,
	})
	if err != nil {
		return nil, fmt.Errorf("start the Redis-protocol listener: %w", err)
	}
	l := &redisListener{srv: rs, done: make(chan error, 1)}
	go func() {
		err := rs.Serve(ln)
		if err != nil {
			logger.Error("redis listener stopped; the HTTP API serves on", "err", err)
		}
		l.done <- err
	}()
	return l, nil
}

// idleOrNever maps the flag's 0 (never) to the listener's negative.
func idleOrNever(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// shutdown stops the listener within ctx and waits for Serve to return;
// later calls do nothing.
func (l *redisListener) shutdown(ctx context.Context, logger *slog.Logger) {
	if l == nil {
		return
	}
	l.once.Do(func() {
		if err := l.srv.Shutdown(ctx); err != nil {
			logger.Warn("redis listener shutdown incomplete", "err", err)
		}
		<-l.done // Serve logged its own failure
	})
}
