package resp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/store"
)

// startReply gives the command's reply WriteTimeout plus its size at the
// minimum rate.
func (c *conn) startReply() {
	_ = c.rw.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
}

// mapKeys maps every key of a command before any is looked up, so that a
// bad key fails the command as a whole; it answers the error itself.
func (c *conn) mapKeys(keys [][]byte) ([]mapped, bool) {
	if len(keys) > c.s.cfg.MaxKeys {
		c.replyErrorf("ERR %d keys in one command; at most %d are accepted", len(keys), c.s.cfg.MaxKeys)
		return nil, false
	}
	out := make([]mapped, len(keys))
	for i, k := range keys {
		m, err := c.s.keys.lookup(c.ctx(), k)
		if err != nil {
			c.keyFailed(k, err)
			return nil, false
		}
		out[i] = m
	}
	return out, true
}

// keyFailed answers a key that could not be mapped.
func (c *conn) keyFailed(key []byte, err error) {
	var ke *keyError
	if errors.As(err, &ke) {
		c.replyError(ke.msg)
		return
	}
	c.s.log.Warn("resp key mapping failed", "namespace", c.s.cfg.Namespace, "redis_key", quoted(key), "err", err)
	c.replyErrorf("ERR map key '%s': %v", quoted(key), err)
}

// cmdGet: GET key. A miss is null.
func cmdGet(c *conn, args [][]byte) {
	if !c.allow(auth.ScopeRead) {
		return
	}
	ms, ok := c.mapKeys(args[1:])
	if !ok {
		return
	}
	if err := c.serveEntry(ms[0]); err != nil {
		c.replyErrorf("ERR read entry: %v", err)
	}
}

// cmdMGet: MGET key [key ...]: an array with each entry or null, streamed
// one entry at a time. An entry that cannot be read is null.
func cmdMGet(c *conn, args [][]byte) {
	if !c.allow(auth.ScopeRead) {
		return
	}
	ms, ok := c.mapKeys(args[1:])
	if !ok {
		return
	}
	c.replyArray(len(ms))
	for _, m := range ms {
		if err := c.serveEntry(m); err != nil {
			c.replyNull()
		}
		if c.broken != nil {
			return
		}
	}
}

// serveEntry answers one lookup with the entry's bytes or null and counts
// it. A store failure other than a miss is logged and returned unanswered
// and uncounted (the HTTP API does not count it either).
func (c *conn) serveEntry(m mapped) error {
	ns := c.s.cfg.Namespace
	meta, rc, err := c.s.cfg.Store.Get(c.ctx(), ns, m.key, 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		c.s.cfg.Outcomes.Lookup(api.Lookup{Route: api.RouteRESP, Namespace: ns, Key: m.key, Backend: m.backend, Name: m.name})
		c.replyNull()
		return nil
	}
	if err != nil {
		c.s.log.Warn("resp read entry failed", "namespace", ns, "key", m.key.String(), "err", err)
		return err
	}
	defer rc.Close()
	if err := c.replyBulkFrom(meta.Size, rc); err != nil {
		// Half a bulk string is on the wire: only closing the connection
		// keeps the client from reading it as a value. It got no value,
		// so no hit is counted (a corrupt chunk: its next GET misses).
		c.broken = fmt.Errorf("stream %s/%s: %w", ns, m.key, err)
		return nil
	}
	// Counted before the reply's final CRLF is flushed (after the
	// command), so a client that read the value finds its hit counted.
	c.s.cfg.Outcomes.Lookup(api.Lookup{Route: api.RouteRESP, Namespace: ns, Key: m.key, Hit: true,
		Backend: meta.Backend, Name: meta.Name, Bytes: meta.Size, CompileSeconds: meta.CompileSeconds})
	return nil
}

// cmdExists: EXISTS key [key ...]: how many of the keys have entries (a
// key named twice counts twice, as in Redis). It reads no entry, so like
// the HTTP API's /exists it is not counted as a lookup.
func cmdExists(c *conn, args [][]byte) {
	if !c.allow(auth.ScopeRead) {
		return
	}
	ms, ok := c.mapKeys(args[1:])
	if !ok {
		return
	}
	var n int64
	for _, m := range ms {
		_, err := c.s.cfg.Store.Stat(c.ctx(), c.s.cfg.Namespace, m.key)
		switch {
		case err == nil:
			n++
		case !errors.Is(err, store.ErrNotFound):
			c.replyErrorf("ERR stat entry: %v", err)
			return
		}
	}
	c.replyInt(n)
}

// setOptions are the options of a SET.
type setOptions struct {
	nx bool // only if absent: null when the key has an entry
}

// parseSetOptions reads SET's options. Expiry options are accepted and
// ignored: entries live until evicted by the store's size limit. XX and GET
// are refused: an entry is never replaced.
func parseSetOptions(opts [][]byte) (setOptions, string) {
	var o setOptions
	var expiry bool
	for i := 0; i < len(opts); i++ {
		switch opt := strings.ToUpper(string(opts[i])); opt {
		case "NX":
			o.nx = true
		case "XX":
			return o, "ERR SET XX is not supported: cachesvc entries are immutable (the first writer wins)"
		case "GET":
			return o, "ERR SET GET is not supported by cachesvc's RESP listener"
		case "KEEPTTL":
			if expiry {
				return o, "ERR syntax error"
			}
			expiry = true
		case "EX", "PX", "EXAT", "PXAT":
			if expiry || i+1 >= len(opts) {
				return o, "ERR syntax error"
			}
			i++
			if n, err := parsePositive(opts[i]); err != nil || n <= 0 {
				return o, "ERR invalid expire time in 'set' command"
			}
			expiry = true
		default:
			return o, "ERR syntax error"
		}
	}
	return o, ""
}

// parsePositive parses a decimal integer.
func parsePositive(b []byte) (int64, error) {
	var n int64
	if len(b) == 0 || len(b) > 18 {
		return 0, errors.New("not a number")
	}
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, errors.New("not a number")
		}
		n = n*10 + int64(ch-'0')
	}
	return n, nil
}

// cmdSet: SET key value [NX] [EX s | PX ms | EXAT t | PXAT t | KEEPTTL].
//
// Entries are immutable. A SET of a key that has an entry answers OK
// whatever the bytes: torch and Triton values for one key are equivalent
// compiles that differ in incidental bytes (the compile time torch records
// in the value, for one), the entry in place serves the key as well, and
// an error would make torch log a failed write for each such SET. Different
// bytes are counted as a conflict and logged.
func cmdSet(c *conn, args [][]byte) {
	if !c.allow(auth.ScopeWrite) {
		return
	}
	opts, bad := parseSetOptions(args[3:])
	if bad != "" {
		c.replyError(bad)
		return
	}
	ms, ok := c.mapKeys(args[1:2])
	if !ok {
		return
	}
	m, value, ns := ms[0], args[2], c.s.cfg.Namespace
	w := api.Write{Namespace: ns, Key: m.key, Backend: m.backend, Name: m.name, Components: m.components}
	if int64(len(value)) > c.s.cfg.MaxValueBytes {
		w.Result = api.WriteTooLarge
		c.s.cfg.Outcomes.Write(w)
		c.replyErrorf("ERR value of %d bytes exceeds the limit of %d bytes", len(value), c.s.cfg.MaxValueBytes)
		return
	}
	w.CompileSeconds = compileSeconds(value)
	res, err := c.s.cfg.Store.Put(c.ctx(), ns, m.key, bytes.NewReader(value), store.PutOptions{
		Size: int64(len(value)), Writer: c.writer(), Backend: m.backend, Name: m.name,
		CompileSeconds: w.CompileSeconds, Components: m.components,
	})
	switch {
	case err == nil:
		w.Result, w.Bytes = api.WriteExists, res.Meta.Size
		if res.Created {
			w.Result = api.WriteCreated
		}
		c.s.cfg.Outcomes.Write(w)
		if opts.nx && !res.Created {
			c.replyNull()
			return
		}
		c.replyOK()
	case errors.Is(err, store.ErrConflict):
		w.Result = api.WriteConflict
		c.s.cfg.Outcomes.Write(w)
		c.s.log.Info("resp SET of an existing key with different bytes; the first entry stays",
			"namespace", ns, "key", m.key.String(), "redis_key", string(args[1]), "bytes", len(value))
		if opts.nx {
			c.replyNull()
			return
		}
		c.replyOK()
	default:
		w.Result = putResult(err)
		c.s.cfg.Outcomes.Write(w)
		c.replyError(putError(c.ctx(), err, len(value)))
	}
}

// putResult names a failed SET's outcome, as the HTTP API does.
func putResult(err error) string {
	switch {
	case errors.Is(err, store.ErrTooLarge):
		return api.WriteTooLarge
	case errors.Is(err, store.ErrQuota):
		return api.WriteQuota
	case errors.Is(err, store.ErrFull):
		return api.WriteFull
	case errors.Is(err, store.ErrQueueFull):
		return api.WriteQueueFull
	}
	return api.WriteError
}

// putError is the reply to a failed SET; nothing was stored.
func putError(ctx context.Context, err error, n int) string {
	switch {
	case errors.Is(err, store.ErrTooLarge):
		return fmt.Sprintf("ERR value of %d bytes exceeds the server's maximum entry size; nothing was stored", n)
	case errors.Is(err, store.ErrQuota):
		return "ERR " + quotaMessage(err) + "; nothing was stored"
	case errors.Is(err, store.ErrFull):
		return "ERR the cache is full (its size limit is reached and nothing can be evicted); nothing was stored"
	case errors.Is(err, store.ErrQueueFull):
		return "ERR the upload queue to the shared tier is full; retry in a few seconds"
	case ctx.Err() != nil:
		return "ERR the server is shutting down; nothing was stored"
	}
	return fmt.Sprintf("ERR store entry: %v; nothing was stored", err)
}

// quotaMessage is the sentence of a quota refusal.
func quotaMessage(err error) string {
	if qe := (*store.QuotaError)(nil); errors.As(err, &qe) {
		return qe.Error()
	}
	return err.Error()
}
