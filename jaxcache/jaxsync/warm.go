// Package jaxsync moves entries between a cachesvc server and a local JAX
// cache directory: Warm fills the directory from a run manifest with batch
// requests; Agent watches a directory written by stock JAX and uploads each
// complete new entry.
//
// # Naming
//
// Entries that stock JAX can use are stored under JAX's own cache key through
// the passthrough backend: the server key is the key of the signature
// {"backend": "passthrough", "kind": "jax", "key": "<JAX key>"}, which is a
// hash and cannot be turned back into the JAX key. JAX needs the file name
// "<JAX key>-cache", so the JAX key travels as the entry's display name
// (X-Cachesvc-Name, stored in the entry's metadata): the agent sets it on
// upload, the batch stream returns it in each member's CACHESVC.name PAX
// record, and run manifests list it. Warm writes only members whose name is
// a JAX cache key ("<module>-<64 hex>"); others (entries stored through the
// xla backend, or written without the name) are counted as unnamed and
// skipped.
//
// # Same keys on both sides
//
// JAX 0.10.2 hashes "<jax_compilation_cache_dir>/xla_gpu_per_fusion_autotune_cache_dir"
// into its keys (jax_persistent_cache_enable_xla_caches defaults to that
// flag, on CPU too), so a JAX key depends on the cache directory's path.
// Warm only helps a process whose cache directory has the same path as the
// uploader's (the usual sweep setup: one configured path on every host), or
// when both set jax_persistent_cache_enable_xla_caches=none
// (JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES=none).
package jaxsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/client"
	"github.com/cachesvc/cachesvc/jaxcache"
)

// Batch sizes for Warm.
const (
	DefaultChunkSize = 500
	// MaxChunkSize is the server's per-request key limit.
	MaxChunkSize = 10_000
)

// ErrBadManifest means a manifest file is not usable.
var ErrBadManifest = errors.New("bad manifest")

// ErrRefused means WarmConfig.Verify refused members: they were not written.
var ErrRefused = errors.New("entries refused")

// Want is one entry to warm: a server key, and its JAX key when known.
type Want struct {
	Key  string `json:"key"`
	Name string `json:"name,omitempty"`
}

// WarmConfig configures Warm.
type WarmConfig struct {
	Client    *client.Client
	Namespace string
	Dir       *jaxcache.Dir
	Entries   []Want
	// ChunkSize is the number of keys per batch request (DefaultChunkSize
	// when 0, at most MaxChunkSize).
	ChunkSize int
	// Progress, when set, is called after each entry is handled, with the
	// number handled so far, the total, and the bytes written so far.
	Progress func(done, total int, bytes int64)
	Logger   *slog.Logger
	// Verify, when set, checks each member before it is written (the
	// server's signature, for one); a member it refuses is not written and
	// is counted in WarmResult.Refused, and Warm returns ErrRefused once
	// the rest is done.
	Verify func(client.Member) error
}

// WarmResult counts what Warm did.
type WarmResult struct {
	Requested int `json:"requested"`
	Written   int `json:"written"`
	Present   int `json:"present"`
	Missing   int `json:"missing"`
	Unnamed   int `json:"unnamed"`
	// Refused counts the members WarmConfig.Verify refused.
	Refused int   `json:"refused"`
	Bytes   int64 `json:"bytes"`
	// Seconds is the wall time of the whole warm.
	Seconds float64 `json:"seconds"`
}

// String is the one-line summary printed when no progress bar is shown.
func (r WarmResult) String() string {
	refused := ""
	if r.Refused > 0 {
		refused = fmt.Sprintf(", %d refused (not written)", r.Refused)
	}
	return fmt.Sprintf("warm: %d requested, %d written (%d bytes), %d already present, %d missing on the server, %d without a JAX key name%s, in %.2fs",
		r.Requested, r.Written, r.Bytes, r.Present, r.Missing, r.Unnamed, refused, r.Seconds)
}

// Warm fetches cfg.Entries with batch requests and writes them into cfg.Dir
// in JAX's layout, atomically, skipping entries already present (by name
// before fetching when the name is known, by the member's name otherwise).
// Each member's SHA-256 is checked before its file becomes visible.
//
// # Errors
// A failed or broken batch stream ends the warm with an error; what was
// written before stays (every file is whole).
func Warm(ctx context.Context, cfg WarmConfig) (WarmResult, error) {
	start := time.Now()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	chunk := cfg.ChunkSize
	if chunk <= 0 {
		chunk = DefaultChunkSize
	}
	chunk = min(chunk, MaxChunkSize)
	var res WarmResult
	seen := make(map[string]bool, len(cfg.Entries))
	var keys []string
	done := 0
	progress := func() {
		done++
		if cfg.Progress != nil {
			cfg.Progress(done, res.Requested, res.Bytes)
		}
	}
	for _, w := range cfg.Entries {
		if seen[w.Key] {
			continue
		}
		seen[w.Key] = true
		res.Requested++
		if w.Name != "" && jaxcache.ValidateName(w.Name) == nil && cfg.Dir.Has(w.Name) {
			res.Present++
			continue
		}
		keys = append(keys, w.Key)
	}
	done = res.Present
	if cfg.Progress != nil {
		cfg.Progress(done, res.Requested, 0)
	}
	handled := make(map[string]bool, len(keys))
	var firstRefusal error
	for i := 0; i < len(keys); i += chunk {
		part := keys[i:min(i+chunk, len(keys))]
		// A broken stream (an entry evicted or found corrupt mid-batch) is
		// retried once for the keys not yet handled.
		for attempt := 0; ; attempt++ {
			missing, err := cfg.Client.Batch(ctx, cfg.Namespace, part, func(m client.Member, r io.Reader) error {
				if err := warmMember(cfg, &res, &firstRefusal, m, r, log); err != nil {
					return err
				}
				handled[m.Key] = true
				progress()
				return nil
			})
			if err == nil {
				res.Missing += len(missing)
				for range missing {
					progress()
				}
				break
			}
			if attempt == 0 && errors.Is(err, client.ErrBrokenStream) && ctx.Err() == nil {
				log.Warn("warm: batch stream broke; retrying the rest once", "namespace", cfg.Namespace, "err", err)
				var rest []string
				for _, k := range part {
					if !handled[k] {
						rest = append(rest, k)
					}
				}
				if len(rest) == 0 {
					break
				}
				part = rest
				continue
			}
			res.Seconds = time.Since(start).Seconds()
			return res, fmt.Errorf("warm batch of %d keys: %w", len(part), err)
		}
	}
	res.Seconds = time.Since(start).Seconds()
	if res.Refused > 0 {
		return res, fmt.Errorf("%w: %d of the run's entries failed verification and were not written (the first: %w)", ErrRefused, res.Refused, firstRefusal)
	}
	log.Info("warm done", "namespace", cfg.Namespace, "dir", cfg.Dir.Path(), "requested", res.Requested,
		"written", res.Written, "present", res.Present, "missing", res.Missing, "unnamed", res.Unnamed, "bytes", res.Bytes)
	return res, nil
}

// warmMember writes one batch member into the directory.
func warmMember(cfg WarmConfig, res *WarmResult, firstRefusal *error, m client.Member, r io.Reader, log *slog.Logger) error {
	if jaxcache.ValidateName(m.Name) != nil {
		res.Unnamed++
		log.Debug("warm: skipping entry without a JAX key name", "namespace", cfg.Namespace, "key", m.Key, "name", m.Name)
		return nil
	}
	if cfg.Verify != nil {
		if err := cfg.Verify(m); err != nil {
			res.Refused++
			if *firstRefusal == nil {
				*firstRefusal = fmt.Errorf("%s (%s): %w", m.Name, m.Key, err)
			}
			log.Warn("warm: entry refused, not written", "namespace", cfg.Namespace, "key", m.Key, "name", m.Name, "err", err)
			return nil
		}
	}
	written, err := cfg.Dir.Write(m.Name, r, m.SHA256, time.Now())
	if err != nil {
		return err // Dir.Write names the file
	}
	if written {
		res.Written++
		res.Bytes += m.Size
	} else {
		res.Present++
	}
	return nil
}

// FromManifest turns a server manifest into the entries to warm.
func FromManifest(m client.Manifest) []Want {
	out := make([]Want, 0, len(m.Keys))
	for _, k := range m.Keys {
		out = append(out, Want{Key: k.Key, Name: k.Name})
	}
	return out
}

// ReadManifestFile reads a manifest file: the JSON of GET
// /v1/{ns}/runs/{run}/manifest ({"keys": [{"key", "name"}, ...]}), or
// {"keys": ["<key>", ...]}, or a bare JSON array of either form. It also
// returns the namespace the file names ("namespace", as the server's
// manifest does), or "" when it names none.
//
// # Errors
//   - ErrBadManifest (wrapped, naming the file and the bad element) for
//     unreadable JSON, no keys, or a key that is not 64 lowercase hex.
func ReadManifestFile(path string) (wants []Want, namespace string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("read manifest: %w", err)
	}
	var raw json.RawMessage = data
	var obj struct {
		Namespace string          `json:"namespace"`
		Keys      json.RawMessage `json:"keys"`
	}
	if len(data) > 0 && firstNonSpace(data) == '{' {
		if err := json.Unmarshal(data, &obj); err != nil {
			return nil, "", fmt.Errorf("%w %s: not valid JSON: %w", ErrBadManifest, path, err)
		}
		if obj.Keys == nil {
			return nil, "", fmt.Errorf(`%w %s: no "keys" field; expected the output of GET /v1/{ns}/runs/{run}/manifest or {"keys": [...]}`, ErrBadManifest, path)
		}
		raw = obj.Keys
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, "", fmt.Errorf(`%w %s: "keys" must be a JSON array of keys or of {"key", "name"} objects: %w`, ErrBadManifest, path, err)
	}
	if len(elems) == 0 {
		return nil, "", fmt.Errorf("%w %s: the manifest lists no keys", ErrBadManifest, path)
	}
	out := make([]Want, 0, len(elems))
	for i, e := range elems {
		var w Want
		if firstNonSpace(e) == '"' {
			if err := json.Unmarshal(e, &w.Key); err != nil {
				return nil, "", fmt.Errorf("%w %s: keys[%d]: %w", ErrBadManifest, path, i, err)
			}
		} else if err := json.Unmarshal(e, &w); err != nil {
			return nil, "", fmt.Errorf(`%w %s: keys[%d] must be a key string or a {"key", "name"} object: %w`, ErrBadManifest, path, i, err)
		}
		if _, err := cachekey.ParseKey(w.Key); err != nil {
			return nil, "", fmt.Errorf("%w %s: keys[%d]: %w", ErrBadManifest, path, i, err)
		}
		out = append(out, w)
	}
	return out, obj.Namespace, nil
}

func firstNonSpace(b []byte) byte {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c
		}
	}
	return 0
}
