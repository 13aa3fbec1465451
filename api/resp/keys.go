package resp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/keying"
	"github.com/cachesvc/cachesvc/plugins"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/wire"
)

// mapped is what a Redis key maps to: the server key and what the plugin
// said of it.
type mapped struct {
	key        cachekey.Key
	backend    string
	name       string
	components map[string]string // bounded for the store; read-only
}

// keyMap maps Redis keys to server keys through the Keyer, whose own memo
// (by signature digest) spares the plugin call for keys torch repeats.
type keyMap struct {
	cfg *Config
}

func newKeyMap(cfg *Config) *keyMap { return &keyMap{cfg: cfg} }

// keyError is a key the listener refuses, with the ERR reply that says why.
type keyError struct{ msg string }

func (e *keyError) Error() string { return e.msg }

// lookup returns the mapping of redisKey. The error is a *keyError (the client's fault) or the Keyer's failure.
func (k *keyMap) lookup(ctx context.Context, redisKey []byte) (mapped, error) {
	if err := k.check(redisKey); err != nil {
		return mapped{}, err
	}
	if err := k.ready(ctx); err != nil {
		return mapped{}, err
	}
	sig := k.signature(string(redisKey))
	res, err := k.cfg.Keyer.Key(ctx, sig)
	if err != nil {
		return mapped{}, k.explain(redisKey, err)
	}
	return mapped{key: res.Key, backend: res.Backend, name: wire.SanitizeName(res.DisplayName),
		components: store.StorableComponents(res.Components)}, nil
}

// pluginWait bounds how long a command waits for the built-in plugins a
// cold start is still compiling: redis clients give up on a reply within
// seconds (redis-py 8 after 5 s), and an error they can read is better.
const pluginWait = 2 * time.Second

// ready waits, up to pluginWait, for plugins still compiling.
func (k *keyMap) ready(ctx context.Context) error {
	h := k.cfg.Keyer.Host()
	if !h.Pending() {
		return nil
	}
	done := make(chan struct{})
	go func() { _ = h.Ready(); close(done) }() // a failed load returns at once; Key reports it
	t := time.NewTimer(pluginWait)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return &keyError{"ERR cachesvc is still compiling its key plugins after a start; retry in a few seconds"}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// check refuses keys that could not map faithfully: empty, too long, or
// with bytes outside printable ASCII (JSON would rewrite invalid UTF-8, so
// two keys could share a signature).
func (k *keyMap) check(key []byte) error {
	if len(key) == 0 {
		return &keyError{"ERR empty key: cachesvc maps torch (pt2:...) and Triton (triton:...) cache keys"}
	}
	if len(key) > k.cfg.MaxKeyBytes {
		return &keyError{fmt.Sprintf("ERR key of %d bytes exceeds the limit of %d bytes", len(key), k.cfg.MaxKeyBytes)}
	}
	for i, ch := range key {
		if ch < 0x20 || ch > 0x7e {
			return &keyError{fmt.Sprintf("ERR key has byte 0x%02x at offset %d: keys must be printable ASCII", ch, i)}
		}
	}
	return nil
}

// signature is the signature of a Redis key.
func (k *keyMap) signature(key string) []byte {
	if k.cfg.Signature != nil {
		return k.cfg.Signature(key)
	}
	b, _ := json.Marshal(struct {
		Backend string `json:"backend"`
		Key     string `json:"key"`
	}{k.cfg.Backend, key})
	return b
}

// explain turns a Keyer failure into the reply it deserves.
func (k *keyMap) explain(key []byte, err error) error {
	var ke *keying.Error
	if !errors.As(err, &ke) {
		return err
	}
	switch {
	case errors.Is(err, keying.ErrPluginError):
		msg := ke.Message
		var pe *plugins.Error
		if errors.As(err, &pe) {
			msg = pe.Message + " (plugin " + pe.Plugin + ")"
		}
		return &keyError{fmt.Sprintf("ERR key '%s' is not a torch or Triton cache key: %s", quoted(key), msg)}
	case errors.Is(err, keying.ErrMalformed), errors.Is(err, keying.ErrTooLarge):
		return &keyError{fmt.Sprintf("ERR key '%s' cannot be mapped: %s", quoted(key), ke.Message)}
	case errors.Is(err, keying.ErrUnknownBackend):
		return &keyError{fmt.Sprintf("ERR this server has no plugin for backend %s, which maps Redis keys: %s", k.cfg.Backend, ke.Message)}
	case errors.Is(err, keying.ErrPluginBusy):
		return &keyError{"ERR the key plugin is busy; retry shortly"}
	}
	return &keyError{fmt.Sprintf("ERR the key plugin failed: %s", ke.Message)}
}

// compileSeconds reads the compile time torch records in its FX graph and
// AOTAutograd values, JSON objects ending `"time_taken_ms": N}`. Only the
// value's first and last 256 bytes are looked at; anything else is 0.
func compileSeconds(v []byte) float64 {
	const window = 256
	if len(v) < 2 || v[0] != '{' {
		return 0
	}
	field := []byte(`"time_taken_ms"`)
	parts := [][]byte{v[max(0, len(v)-window):], v[:min(len(v), window)]}
	for _, part := range parts {
		i := bytes.LastIndex(part, field)
		if i < 0 {
			continue
		}
		rest := bytes.TrimLeft(part[i+len(field):], " \t\r\n")
		if len(rest) == 0 || rest[0] != ':' {
			continue
		}
		rest = bytes.TrimLeft(rest[1:], " \t\r\n")
		n := 0
		for n < len(rest) && n < 24 && (rest[n] >= '0' && rest[n] <= '9' || rest[n] == '.' || rest[n] == 'e' || rest[n] == 'E' || rest[n] == '+' || rest[n] == '-') {
			n++
		}
		ms, err := strconv.ParseFloat(string(rest[:n]), 64)
		if err != nil || ms < 0 || ms > 1e12 {
			continue
		}
		return ms / 1000
	}
	return 0
}
