// Package keying turns a signature (JSON with a "backend" field) into a cache
// key: it hands the signature to the backend's plugin and hashes the
// plugin's identity, the backend and the canonical bytes:
//
//	key = sha256(plugin name@version ‖ 0x00 ‖ backend ‖ 0x00 ‖ canonical)
//
// Plugins are deterministic, so a Keyer remembers recent results by the
// digest of the raw signature, SignatureDigest: the SHA-256 of its exact
// bytes (a repeated lookup skips the plugin, and LookupDigest answers a
// client that sends only the digest), optionally kept across restarts in
// Config.MemoFile (persist.go); a remembered result is used only while the
// same plugin code (the SHA-256 of its wasm) serves its backend (code.go),
// and
// collapses concurrent identical signatures into one plugin call. It also
// remembers, for a bounded time, the components behind recently issued keys,
// so that an entry written after a lookup can carry them (see Recall).
//
// With Config.SharedMemo (fleet/state keeps it on the fleet's bucket) the
// memo is fleet-wide as well: a local miss consults the shared memo before
// calling the plugin, and a computed result is written there in the
// background (see shared.go).
package keying

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/plugins"
)

// Sentinel errors; every error Key returns is an *Error whose Kind is one of
// them. The HTTP layer maps each to one status and code.
var (
	// ErrMalformed: the signature is not a JSON object with a string
	// "backend" field (400).
	ErrMalformed = errors.New("malformed signature")
	// ErrTooLarge: the signature exceeds Config.MaxSignatureBytes (413).
	ErrTooLarge = errors.New("signature too large")
	// ErrUnknownBackend: no plugin handles the backend (422).
	ErrUnknownBackend = errors.New("unknown backend")
	// ErrPluginError: the plugin rejected the signature; the message is the
	// plugin's own (422).
	ErrPluginError = errors.New("plugin rejected the signature")
	// ErrPluginFailed: the plugin timed out, crashed, ran out of memory or
	// returned malformed output (422).
	ErrPluginFailed = errors.New("plugin failed")
	// ErrPluginBusy: every instance of the plugin stayed busy (503).
	ErrPluginBusy = errors.New("plugin busy")
)

// Error is a failed Key call.
type Error struct {
	// Kind is one of the sentinels above.
	Kind error
	// Message is a human sentence naming the problem.
	Message string
	// Err is the underlying cause, if any (for example a *plugins.Error).
	Err error
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns Kind and the cause, so errors.Is matches both.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// Result is the key of one signature and what explains it.
type Result struct {
	// Key is the cache key.
	Key cachekey.Key `json:"-"`
	// Backend is the signature's backend.
	Backend string `json:"backend"`
	// Plugin is the plugin's "name@version".
	Plugin string `json:"plugin"`
	// PluginSHA256 is the hex SHA-256 of the wasm code that computed the
	// result (plugins.Plugin.CodeSHA256): a memo uses a result only while
	// that same code serves Plugin (code.go).
	PluginSHA256 string `json:"-"`
	// DisplayName is a human-readable program name (not part of the key).
	DisplayName string `json:"display_name"`
	// Components are named digests of the signature's parts; never nil.
	// Treat as read-only: results are shared between callers.
	Components map[string]string `json:"components"`
	// CanonicalSize is the length of the canonical bytes.
	CanonicalSize int `json:"canonical_size"`
	// Canonical holds the canonical bytes when the plugin ran for this call
	// and Config.KeepCanonical is set; nil otherwise.
	Canonical []byte `json:"-"`
	// Memo is true when the result came from the memo without a plugin call.
	Memo bool `json:"-"`
}

// Defaults for Config's zero values.
const (
	DefaultMaxSignatureBytes = 64 << 20
	DefaultMemoEntries       = 4096
	DefaultRecallEntries     = 4096
	// DefaultMemoBytes bounds the memo and the recall table each, counting
	// the strings of every result (components dominate).
	DefaultMemoBytes = 16 << 20
	DefaultRecallTTL = 6 * time.Hour
)

// Config configures a Keyer. The zero value of every field except Host means
// its default.
type Config struct {
	// Host runs the plugins. Required.
	Host *plugins.Host
	// MaxSignatureBytes rejects larger signatures with ErrTooLarge. 0 means
	// DefaultMaxSignatureBytes.
	MaxSignatureBytes int64
	// MemoEntries bounds the memo from signature digest to result. 0 means
	// DefaultMemoEntries; negative disables the memo.
	MemoEntries int
	// RecallEntries and RecallTTL bound how many recently issued keys keep
	// their components for Recall, and for how long. 0 means the defaults.
	RecallEntries int
	RecallTTL     time.Duration
	// MemoBytes bounds the memo and the recall table each in bytes of result
	// text. 0 means DefaultMemoBytes.
	MemoBytes int64
	// MemoFile, when set, keeps the memo across restarts: it is loaded at
	// New and written there in the background every MemoSaveInterval
	// (DefaultMemoSaveInterval when 0) when it changed, and at Close (see
	// persist.go). The memo's bounds bound the file. "" keeps the memo in
	// memory only.
	MemoFile         string
	MemoSaveInterval time.Duration
	// KeepCanonical makes Key return the canonical bytes (the CLI prints
	// their size and digest; the server does not need them).
	KeepCanonical bool
	// Now returns the time; nil means time.Now (tests inject a clock).
	Now func() time.Time

	// SharedMemo, when set, is consulted on a local memo miss and receives
	// every computed result (see shared.go). Nil keeps the memo local.
	SharedMemo SharedMemo
	// SharedMemoQueue bounds the results waiting to be written to
	// SharedMemo; when it is full a result is dropped and counted
	// (DefaultSharedMemoQueue when 0).
	SharedMemoQueue int
	// SharedMemoTimeout bounds one shared memo read or write
	// (DefaultSharedMemoTimeout when 0); a slower read counts as a miss.
	SharedMemoTimeout time.Duration
	// Logger receives shared memo warnings (slog.Default() when nil).
	Logger *slog.Logger
}

// Keyer computes keys. It is safe for concurrent use.
type Keyer struct {
	cfg    Config
	flight singleflight.Group
	memo   *lru[[32]byte, Result]

	mu     sync.Mutex
	recall *lru[cachekey.Key, recalled]
	// forgets counts ForgetPlugin calls (under mu): a result computed
	// across one is not memoized (forget.go).
	forgets uint64

	shared sharedMemo
	// other counts memo results of other plugin code (code.go), under mu.
	other otherCode

	persist   *persister // nil without Config.MemoFile
	fileStats MemoFileStats
}

type recalled struct {
	res Result
	at  time.Time
}

// New returns a Keyer for cfg. With cfg.SharedMemo it starts the goroutine
// that writes results to it; Close stops it.
func New(cfg Config) (*Keyer, error) {
	if cfg.Host == nil {
		return nil, errors.New("new keyer: Config.Host is required")
	}
	if cfg.MaxSignatureBytes <= 0 {
		cfg.MaxSignatureBytes = DefaultMaxSignatureBytes
	}
	if cfg.MemoEntries == 0 {
		cfg.MemoEntries = DefaultMemoEntries
	}
	if cfg.RecallEntries <= 0 {
		cfg.RecallEntries = DefaultRecallEntries
	}
	if cfg.RecallTTL <= 0 {
		cfg.RecallTTL = DefaultRecallTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MemoBytes <= 0 {
		cfg.MemoBytes = DefaultMemoBytes
	}
	k := &Keyer{cfg: cfg, recall: newLRU[cachekey.Key, recalled](cfg.RecallEntries)}
	k.recall.maxBytes, k.recall.sizeOf = cfg.MemoBytes, func(r recalled) int64 { return resultSize(r.res) }
	if cfg.MemoEntries > 0 {
		k.memo = newLRU[[32]byte, Result](cfg.MemoEntries)
		k.memo.maxBytes, k.memo.sizeOf = cfg.MemoBytes, resultSize
	}
	k.startShared()
	k.startPersist()
	return k, nil
}

// resultSize estimates the memory a remembered result holds.
func resultSize(r Result) int64 {
	n := int64(128 + len(r.Backend) + len(r.Plugin) + len(r.PluginSHA256) + len(r.DisplayName))
	for k, v := range r.Components {
		n += int64(len(k) + len(v) + 32)
	}
	return n
}

// MaxSignatureBytes is the configured signature size limit.
func (k *Keyer) MaxSignatureBytes() int64 { return k.cfg.MaxSignatureBytes }

// Host returns the plugin host.
func (k *Keyer) Host() *plugins.Host { return k.cfg.Host }

// ComputeKey returns sha256(pluginID ‖ 0 ‖ backend ‖ 0 ‖ canonical).
func ComputeKey(pluginID, backend string, canonical []byte) cachekey.Key {
	h := sha256.New()
	h.Write([]byte(pluginID))
	h.Write([]byte{0})
	h.Write([]byte(backend))
	h.Write([]byte{0})
	h.Write(canonical)
	var k cachekey.Key
	h.Sum(k[:0])
	return k
}

// Key canonicalizes signature through its backend's plugin and returns the
// key. The signature slice is not retained.
//
// # Errors
//
// An *Error whose Kind is ErrMalformed, ErrTooLarge, ErrUnknownBackend,
// ErrPluginError, ErrPluginFailed or ErrPluginBusy; or ctx's error.
func (k *Keyer) Key(ctx context.Context, signature []byte) (Result, error) {
	if int64(len(signature)) > k.cfg.MaxSignatureBytes {
		return Result{}, k.tooLarge(len(signature))
	}
	return k.KeyDigest(ctx, signature, sha256.Sum256(signature))
}

func (k *Keyer) tooLarge(n int) error {
	return &Error{Kind: ErrTooLarge, Message: fmt.Sprintf(
		"signature of %d bytes exceeds the limit of %d bytes", n, k.cfg.MaxSignatureBytes)}
}

// SignatureDigest is the digest the memo and digest-first lookups know a
// signature by: the SHA-256 of its exact bytes (as sent, after any
// Content-Encoding is undone). A client computes the same to send it
// alone.
func SignatureDigest(signature []byte) [32]byte { return sha256.Sum256(signature) }

// KeyDigest is Key for a caller that already hashed the signature while
// reading it: digest must be SignatureDigest(signature), or the memo would
// learn a wrong answer. It saves hashing a large signature twice.
func (k *Keyer) KeyDigest(ctx context.Context, signature []byte, digest [32]byte) (Result, error) {
	if int64(len(signature)) > k.cfg.MaxSignatureBytes {
		return Result{}, k.tooLarge(len(signature))
	}
	if res, ok := k.fromMemo(digest); ok {
		k.remember(res)
		return res, nil
	}
	// Collapse concurrent identical signatures. The flight runs detached from
	// any one caller's cancellation (the host bounds its time); each caller
	// waits on its own context.
	ch := k.flight.DoChan(string(digest[:]), func() (any, error) {
		if res, ok := k.fromMemo(digest); ok { // a flight may have just landed
			return res, nil
		}
		gen := k.forgetGen()
		fctx := context.WithoutCancel(ctx)
		if res, ok := k.fromShared(fctx, signature, digest); ok {
			k.memoize(digest, res, gen)
			return res, nil
		}
		res, err := k.compute(fctx, signature)
		if err != nil {
			return nil, err
		}
		k.memoize(digest, res, gen)
		k.share(digest, res)
		return res, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return Result{}, r.Err
		}
		res := r.Val.(Result)
		if r.Shared {
			res.Canonical = nil
		}
		k.remember(res)
		return res, nil
	case <-ctx.Done():
		return Result{}, fmt.Errorf("compute key: %w", ctx.Err())
	}
}

// memoize keeps res in the local memo, unless ForgetPlugin ran since gen
// (forgetGen) was read: res may come from the code it forgot.
func (k *Keyer) memoize(digest [32]byte, res Result, gen uint64) {
	if k.memo == nil {
		return
	}
	m := res
	m.Canonical, m.Memo = nil, true
	k.mu.Lock()
	if k.forgets != gen {
		k.mu.Unlock()
		return
	}
	k.memo.put(digest, m)
	k.mu.Unlock()
	if k.persist != nil {
		k.persist.dirty.Store(true)
	}
}

func (k *Keyer) fromMemo(digest [32]byte) (Result, bool) {
	if k.memo == nil {
		return Result{}, false
	}
	k.mu.Lock()
	res, ok := k.memo.get(digest)
	k.mu.Unlock()
	if !ok {
		return Result{}, false
	}
	// A reloaded plugin (new version) invalidates what its predecessor said.
	p, found := k.cfg.Host.ForBackend(res.Backend)
	if !found || p.ID() != res.Plugin {
		return Result{}, false
	}
	// So does other code under the same name@version (code.go).
	if p.CodeSHA256() != res.PluginSHA256 {
		k.dropOtherCode(digest, res, p.CodeSHA256())
		return Result{}, false
	}
	return res, true
}

// compute runs the plugin.
func (k *Keyer) compute(ctx context.Context, signature []byte) (Result, error) {
	backend, err := backendOf(signature)
	if err != nil {
		return Result{}, err
	}
	if err := k.cfg.Host.Ready(); err != nil {
		return Result{}, &Error{Kind: ErrPluginFailed, Message: "load plugins: " + err.Error(), Err: err}
	}
	res, err := k.canonicalize(ctx, backend, signature)
	if err != nil && (errors.Is(err, ErrUnknownBackend) || errors.Is(err, ErrPluginError)) && !json.Valid(signature) {
		// The fast backend scan does not validate; report malformed JSON as
		// such rather than as the plugin's complaint.
		_, jerr := backendOfSlow(signature)
		if jerr == nil {
			jerr = &Error{Kind: ErrMalformed, Message: "signature is not valid JSON"}
		}
		return Result{}, jerr
	}
	return res, err
}

func (k *Keyer) canonicalize(ctx context.Context, backend string, signature []byte) (Result, error) {
	p, ok := k.cfg.Host.ForBackend(backend)
	if !ok {
		known := k.cfg.Host.Backends()
		return Result{}, &Error{Kind: ErrUnknownBackend, Message: fmt.Sprintf(
			"no plugin handles backend %q; known backends: %s", backend, strings.Join(known, ", "))}
	}
	out, err := p.Canonicalize(ctx, signature)
	if errors.Is(err, plugins.ErrClosed) {
		// A plugin reload (plugins.Host.ReloadDir) retired p between the
		// lookup and the call: the backend's new plugin answers instead.
		if q, ok := k.cfg.Host.ForBackend(backend); ok && q != p {
			p = q
			out, err = p.Canonicalize(ctx, signature)
		}
	}
	if err != nil {
		return Result{}, pluginError(p.ID(), err)
	}
	res := Result{
		Key:           ComputeKey(p.ID(), backend, out.Canonical),
		Backend:       backend,
		Plugin:        p.ID(),
		PluginSHA256:  p.CodeSHA256(),
		DisplayName:   out.DisplayName,
		Components:    out.Components,
		CanonicalSize: len(out.Canonical),
	}
	if k.cfg.KeepCanonical {
		res.Canonical = out.Canonical
	}
	return res, nil
}

// pluginError maps a plugins error to a keying *Error.
func pluginError(id string, err error) error {
	switch {
	case errors.Is(err, plugins.ErrPlugin):
		return &Error{Kind: ErrPluginError, Message: fmt.Sprintf("plugin %s rejected the signature: %s", id, err.Error()), Err: err}
	case errors.Is(err, plugins.ErrBusy):
		return &Error{Kind: ErrPluginBusy, Message: err.Error() + "; retry shortly", Err: err}
	case errors.Is(err, plugins.ErrInputTooLarge):
		return &Error{Kind: ErrTooLarge, Message: err.Error(), Err: err}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("canonicalize with %s: %w", id, err)
	default:
		return &Error{Kind: ErrPluginFailed, Message: err.Error(), Err: err}
	}
}

// backendOf returns the signature's top-level "backend" string: by the fast
// scan when it understands the input, else by encoding/json, whose errors
// are precise. A signature the fast scan accepted is validated in full only
// when keying fails (see compute), so that malformed JSON is still a 400.
func backendOf(signature []byte) (string, error) {
	if b, ok := scanBackend(signature); ok && b != "" {
		return b, nil
	}
	return backendOfSlow(signature)
}

// backendOfSlow is backendOf through encoding/json, whose errors are
// precise. encoding/json matches a field name regardless of case, so the
// value is then taken from the last field named exactly "backend"
// (exactBackend): as the fast scan does, and as every plugin reads it, so
// that an escape elsewhere in a signature never changes its backend.
func backendOfSlow(signature []byte) (string, error) {
	var s struct {
		Backend *json.RawMessage `json:"backend"`
	}
	if err := json.Unmarshal(signature, &s); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field == "" {
			return "", &Error{Kind: ErrMalformed, Message: "signature must be a JSON object with a \"backend\" field"}
		}
		return "", &Error{Kind: ErrMalformed, Message: "signature is not valid JSON: " + err.Error(), Err: err}
	}
	raw, found := exactBackend(signature)
	if !found {
		return "", &Error{Kind: ErrMalformed, Message: "signature has no \"backend\" field (field names are case-sensitive)"}
	}
	var b string
	if err := json.Unmarshal(raw, &b); err != nil || b == "" {
		return "", &Error{Kind: ErrMalformed, Message: "signature field \"backend\" must be a non-empty string"}
	}
	return b, nil
}

// exactBackend returns the value of the last top-level field of the JSON
// object signature named exactly "backend" (escapes decoded), walking the
// tokens so that no other value is copied whole.
func exactBackend(signature []byte) (raw json.RawMessage, found bool) {
	dec := json.NewDecoder(bytes.NewReader(signature))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		if name, _ := t.(string); name == "backend" {
			if err := dec.Decode(&raw); err != nil {
				return nil, false
			}
			found = true
			continue
		}
		for depth := 0; ; {
			t, err := dec.Token()
			if err != nil {
				return nil, false
			}
			switch t {
			case json.Delim('{'), json.Delim('['):
				depth++
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
			if depth == 0 {
				break
			}
		}
	}
	return raw, found
}

// remember keeps res for Recall.
func (k *Keyer) remember(res Result) {
	r := res
	r.Canonical = nil
	k.mu.Lock()
	k.recall.put(res.Key, recalled{res: r, at: k.cfg.Now()})
	k.mu.Unlock()
}

// Recall returns the result behind a key this Keyer issued within
// Config.RecallTTL (and among the last Config.RecallEntries keys), so that a
// PUT of that key can store its components, backend and display name.
func (k *Keyer) Recall(key cachekey.Key) (Result, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	r, ok := k.recall.get(key)
	if !ok {
		return Result{}, false
	}
	if k.cfg.Now().Sub(r.at) > k.cfg.RecallTTL {
		k.recall.remove(key)
		return Result{}, false
	}
	return r.res, true
}
