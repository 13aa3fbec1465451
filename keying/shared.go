package keying

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
)

// Defaults for the shared memo's Config fields.
const (
	// DefaultSharedMemoQueue bounds the results waiting to be shared.
	DefaultSharedMemoQueue = 1024
	// DefaultSharedMemoTimeout bounds one shared memo read or write.
	DefaultSharedMemoTimeout = 2 * time.Second
	// MaxSharedMemoBytes bounds one shared memo value; implementations
	// should not return more (a larger value is not a result).
	MaxSharedMemoBytes = 1 << 20
)

// SharedMemo is a fleet-wide memo from a signature's digest to its keying
// result, declared here where it is consumed (fleet/state keeps it on S3 as
// memo/<plugin@version>/<code sha256 hex>/<signature sha256 hex>). A
// plugin is deterministic, so what one replica computed for (plugin id,
// code, digest) holds for every replica running the same plugin code; code
// is the hex SHA-256 of the plugin's wasm (plugins.Plugin.CodeSHA256), so
// that replicas running different files of one name@version (a rolling
// upgrade) never read each other's results. Values are opaque to the backend: the
// Keyer encodes them and validates what it reads, so a corrupt value is a
// miss (and is overwritten by the next computation of that signature).
// Implementations must be safe for concurrent use; any error is a fault,
// counted and treated as a miss.
type SharedMemo interface {
	// Get returns the value stored for (plugin, code, digest); found is
	// false on a miss.
	Get(ctx context.Context, plugin, code string, digest [32]byte) (value []byte, found bool, err error)
	// Put stores value for (plugin, code, digest), replacing any.
	Put(ctx context.Context, plugin, code string, digest [32]byte, value []byte) error
}

// SharedMemoStats counts the shared memo's traffic, for metrics.
type SharedMemoStats struct {
	// Hits, Misses and Corrupt count reads: found and valid, absent, found
	// but not a valid result for the plugin.
	Hits, Misses, Corrupt uint64
	// Errors counts failed reads and writes (the backend's faults).
	Errors uint64
	// Written counts results stored; Dropped those discarded because the
	// queue was full or the Keyer closed first.
	Written, Dropped uint64
	// Queued is the number of results waiting to be written now.
	Queued int
}

// sharedMemo is the Keyer's side of a SharedMemo: the bounded write queue
// and its worker, and the counters.
type sharedMemo struct {
	m       SharedMemo
	timeout time.Duration
	log     *slog.Logger

	mu     sync.RWMutex // guards closed against sends on q
	closed bool
	q      chan memoWrite
	done   chan struct{}
	abort  context.CancelFunc
	base   context.Context

	hits, misses, corrupt, errs, written, dropped atomic.Uint64
	lastLog                                       atomic.Int64
}

type memoWrite struct {
	plugin string
	code   string
	digest [32]byte
	value  []byte
}

// memoRecordVersion is the format of memoRecord. 2 adds Code; a value of
// format 1 does not say which code computed it and is not used.
const memoRecordVersion = 2

// memoRecord is the JSON of a shared memo value and of a memo file line.
type memoRecord struct {
	Version int    `json:"v"`
	Key     string `json:"key"`
	Plugin  string `json:"plugin"`
	// Code is the hex SHA-256 of the plugin's wasm that computed the
	// result (Result.PluginSHA256).
	Code          string            `json:"code"`
	Backend       string            `json:"backend"`
	DisplayName   string            `json:"display_name,omitempty"`
	Components    map[string]string `json:"components"`
	CanonicalSize int               `json:"canonical_size"`
}

func encodeMemo(r Result) ([]byte, error) {
	return json.Marshal(memoRecord{Version: memoRecordVersion, Key: r.Key.String(), Plugin: r.Plugin, Code: r.PluginSHA256, Backend: r.Backend,
		DisplayName: r.DisplayName, Components: r.Components, CanonicalSize: r.CanonicalSize})
}

// decodeMemo validates a shared value: it must decode, be of
// memoRecordVersion, name plugin and code (any plugin and code when they
// are "", as for the memo file, whose validity is checked against the
// loaded plugins on use), and name backend unless backend is "".
func decodeMemo(b []byte, plugin, code, backend string) (Result, error) {
	if len(b) > MaxSharedMemoBytes {
		return Result{}, fmt.Errorf("memo value of %d bytes", len(b))
	}
	var m memoRecord
	if err := json.Unmarshal(b, &m); err != nil {
		return Result{}, fmt.Errorf("decode memo value: %w", err)
	}
	key, err := cachekey.ParseKey(m.Key)
	switch {
	case err != nil:
		return Result{}, fmt.Errorf("memo value key: %w", err)
	case m.Version != memoRecordVersion || m.Plugin == "" || plugin != "" && m.Plugin != plugin || m.Backend == "" || backend != "" && m.Backend != backend || m.CanonicalSize < 0:
		return Result{}, fmt.Errorf("memo value for %s/%s (v%d, size %d) does not fit plugin %s, backend %q",
			m.Plugin, m.Backend, m.Version, m.CanonicalSize, plugin, backend)
	case !isCodeHash(m.Code) || code != "" && m.Code != code:
		return Result{}, fmt.Errorf("memo value for %s computed by code %.64q, not by %s", m.Plugin, m.Code, code)
	}
	if m.Components == nil {
		m.Components = map[string]string{}
	}
	return Result{Key: key, Backend: m.Backend, Plugin: m.Plugin, PluginSHA256: m.Code, DisplayName: m.DisplayName,
		Components: m.Components, CanonicalSize: m.CanonicalSize, Memo: true}, nil
}

// startShared starts the write worker when a SharedMemo is configured.
func (k *Keyer) startShared() {
	cfg := &k.cfg
	if cfg.SharedMemo == nil {
		return
	}
	if cfg.SharedMemoQueue <= 0 {
		cfg.SharedMemoQueue = DefaultSharedMemoQueue
	}
	if cfg.SharedMemoTimeout <= 0 {
		cfg.SharedMemoTimeout = DefaultSharedMemoTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &k.shared
	s.m, s.timeout, s.log = cfg.SharedMemo, cfg.SharedMemoTimeout, cfg.Logger
	s.q = make(chan memoWrite, cfg.SharedMemoQueue)
	s.done = make(chan struct{})
	s.base, s.abort = context.WithCancel(context.Background())
	go s.writer()
}

// writer stores queued results one at a time: the queue, not concurrency,
// absorbs bursts, and one slow backend costs one goroutine.
func (s *sharedMemo) writer() {
	defer close(s.done)
	for w := range s.q {
		if s.base.Err() != nil {
			s.dropped.Add(1)
			continue
		}
		ctx, cancel := context.WithTimeout(s.base, s.timeout)
		err := s.m.Put(ctx, w.plugin, w.code, w.digest, w.value)
		cancel()
		if err != nil {
			s.fault("write", err)
			continue
		}
		s.written.Add(1)
	}
}

// fault counts a backend failure and logs it, at most every 10 s.
func (s *sharedMemo) fault(op string, err error) {
	n := s.errs.Add(1)
	now := time.Now().UnixNano()
	last := s.lastLog.Load()
	if now-last < int64(10*time.Second) || !s.lastLog.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("shared signature memo failed; keying goes on without it", "op", op, "errors", n, "err", err)
}

// share queues res for the shared memo without waiting: a full queue (a
// slow or unreachable backend) drops it.
func (k *Keyer) share(digest [32]byte, res Result) {
	s := &k.shared
	if s.m == nil {
		return
	}
	b, err := encodeMemo(res)
	if err != nil {
		s.fault("encode", err)
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.dropped.Add(1)
		return
	}
	select {
	case s.q <- memoWrite{plugin: res.Plugin, code: res.PluginSHA256, digest: digest, value: b}:
	default:
		s.dropped.Add(1)
	}
}

// fromShared looks the signature up in the shared memo under its backend's
// current plugin and code.
func (k *Keyer) fromShared(ctx context.Context, signature []byte, digest [32]byte) (Result, bool) {
	if k.shared.m == nil {
		return Result{}, false
	}
	backend, err := backendOf(signature)
	if err != nil {
		return Result{}, false // compute reports it
	}
	p, ok := k.cfg.Host.ForBackend(backend)
	if !ok {
		return Result{}, false
	}
	return k.sharedGet(ctx, p.ID(), p.CodeSHA256(), backend, digest)
}

func (k *Keyer) sharedGet(ctx context.Context, plugin, code, backend string, digest [32]byte) (Result, bool) {
	s := &k.shared
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	b, found, err := s.m.Get(ctx, plugin, code, digest)
	switch {
	case err != nil:
		s.fault("read", err)
		return Result{}, false
	case !found:
		s.misses.Add(1)
		return Result{}, false
	}
	res, err := decodeMemo(b, plugin, code, backend)
	if err != nil {
		s.corrupt.Add(1)
		s.log.Warn("ignoring a corrupt shared memo value", "plugin", plugin, "err", err)
		return Result{}, false
	}
	s.hits.Add(1)
	return res, true
}

// LookupDigest returns the result of the signature whose SHA-256 is digest
// when this Keyer's memo or the shared memo knows it, without the
// signature and without calling a plugin: the digest-first lookup. backend
// narrows the search to one backend's plugin; "" tries every loaded
// plugin's shared memo in turn. A result found is remembered (local memo,
// Recall). Shared memo faults count as misses.
func (k *Keyer) LookupDigest(ctx context.Context, digest [32]byte, backend string) (Result, bool) {
	if res, ok := k.fromMemo(digest); ok && (backend == "" || res.Backend == backend) {
		k.remember(res)
		return res, true
	}
	if k.shared.m == nil {
		return Result{}, false
	}
	backends := []string{backend}
	if backend == "" {
		backends = k.cfg.Host.Backends()
	}
	gen := k.forgetGen()
	tried := make(map[string]bool)
	for _, b := range backends {
		p, ok := k.cfg.Host.ForBackend(b)
		if !ok || tried[p.ID()] {
			continue
		}
		tried[p.ID()] = true
		res, ok := k.sharedGet(ctx, p.ID(), p.CodeSHA256(), backend, digest)
		if !ok {
			continue
		}
		// The stored backend must still be handled by this plugin (and
		// code) here.
		if q, ok := k.cfg.Host.ForBackend(res.Backend); !ok || q.ID() != res.Plugin || q.CodeSHA256() != res.PluginSHA256 {
			continue
		}
		k.memoize(digest, res, gen)
		k.remember(res)
		return res, true
	}
	return Result{}, false
}

// isCodeHash reports whether s is a hex SHA-256, as CodeSHA256 gives.
func isCodeHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// SharedMemoStats returns the shared memo's counters; zero without one.
func (k *Keyer) SharedMemoStats() SharedMemoStats {
	s := &k.shared
	st := SharedMemoStats{Hits: s.hits.Load(), Misses: s.misses.Load(), Corrupt: s.corrupt.Load(),
		Errors: s.errs.Load(), Written: s.written.Load(), Dropped: s.dropped.Load()}
	if s.q != nil {
		st.Queued = len(s.q)
	}
	return st
}

// Close writes the memo file a last time (Config.MemoFile) and stops the
// shared memo writer after it drains its queue, or when ctx ends (what is
// still queued is then dropped and counted). It does not close the plugin
// host. Key calls after Close still work; their results are no longer
// shared or saved.
func (k *Keyer) Close(ctx context.Context) error {
	k.closePersist()
	s := &k.shared
	if s.m == nil {
		return nil
	}
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.q)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		s.abort()
		<-s.done
		return fmt.Errorf("close keyer: shared memo writes dropped: %w", ctx.Err())
	}
}
