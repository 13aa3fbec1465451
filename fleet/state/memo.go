package state

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/keying"
)

// Memo is keying.SharedMemo on the bucket:
// memo/<plugin@version>/<sha256 of the plugin's wasm, hex>/<sha256 of the
// signature, hex>, the JSON result the Keyer encoded. The code hash keeps
// apart the results of different files of one name@version, which replicas
// run side by side during a rolling upgrade. Create one with Client.Memo and pass it as
// keying.Config.SharedMemo.
type Memo struct{ c *Client }

var _ keying.SharedMemo = (*Memo)(nil)

// Memo returns the signature memo backend of the bucket.
func (c *Client) Memo() *Memo { return &Memo{c: c} }

func (m *Memo) name(plugin, code string, digest [32]byte) string {
	// Plugin ids are name@version; escaping keeps any odd one (and any
	// code but the hex the Keyer passes) to a single path segment.
	return m.c.cfg.Prefix + "memo/" + url.PathEscape(plugin) + "/" + url.PathEscape(code) + "/" + hex.EncodeToString(digest[:])
}

// Get reads the value; found is false when there is none. A value over
// keying.MaxSharedMemoBytes is returned cut, which the Keyer rejects.
func (m *Memo) Get(ctx context.Context, plugin, code string, digest [32]byte) ([]byte, bool, error) {
	name := m.name(plugin, code, digest)
	rc, _, _, err := m.c.core.GetObject(ctx, m.c.cfg.Bucket, name, minio.GetObjectOptions{})
	if err != nil {
		if isMiss(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("%s: %w", m.c.where("get memo", name), err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, keying.MaxSharedMemoBytes+1))
	if err != nil {
		if isMiss(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("%s: %w", m.c.where("read memo", name), err)
	}
	return b, true, nil
}

// Put stores value, replacing a value already there (results are
// deterministic, so a concurrent writer stores the same bytes, and
// replacing is what mends a corrupt value), except one of a newer record
// format than value's (its "v" field, keying's memo record version): that
// is a newer replica's during a rolling upgrade, which this build cannot
// read and must not take from the replicas that can; Put leaves it and
// returns nil. It creates with If-None-Match: * (one request when there is
// no value, the usual case), and replaces with If-Match on the ETag of the
// value it read, so that a newer value written meanwhile is kept too; under
// s3.Config.CheckThenWrite (servers without conditional writes) it reads,
// then writes.
func (m *Memo) Put(ctx context.Context, plugin, code string, digest [32]byte, value []byte) error {
	name := m.name(plugin, code, digest)
	cond := !m.c.cfg.CheckThenWrite
	if cond {
		err := m.put(ctx, name, value, "*", true)
		if err == nil {
			return nil
		}
		if !isPrecondition(err) {
			return fmt.Errorf("%s: %w", m.c.where("put memo", name), err)
		}
	}
	cur, etag, err := m.read(ctx, name)
	switch {
	case err != nil:
		return err
	case cur != nil && memoVersion(cur) > memoVersion(value):
		return nil // a newer replica's
	case cur == nil: // deleted since the create was refused
		etag = "*"
	}
	if err := m.put(ctx, name, value, etag, cond); err != nil && !(cond && (isPrecondition(err) || isMiss(err))) {
		return fmt.Errorf("%s: %w", m.c.where("put memo", name), err)
	}
	return nil // stored, or another writer's value is there now: leave it
}

// put writes value to name: with If-None-Match: * when etag is "*", with
// If-Match on etag otherwise, unconditionally when cond is false. Its error
// is the client's, unwrapped, for isPrecondition.
func (m *Memo) put(ctx context.Context, name string, value []byte, etag string, cond bool) error {
	opts := minio.PutObjectOptions{ContentType: "application/json", DisableMultipart: true}
	switch {
	case !cond:
	case etag == "*":
		opts.SetMatchETagExcept("*")
	default:
		opts.SetMatchETag(etag)
	}
	_, err := m.c.core.PutObject(ctx, m.c.cfg.Bucket, name, bytes.NewReader(value), int64(len(value)), "", "", opts)
	return err
}

// read returns the value at name and its ETag; nil and no error when there
// is none.
func (m *Memo) read(ctx context.Context, name string) ([]byte, string, error) {
	rc, info, _, err := m.c.core.GetObject(ctx, m.c.cfg.Bucket, name, minio.GetObjectOptions{})
	if err != nil {
		if isMiss(err) {
			return nil, "", nil
		}
		return nil, "", fmt.Errorf("%s: %w", m.c.where("get memo", name), err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, keying.MaxSharedMemoBytes+1))
	if err != nil {
		if isMiss(err) {
			return nil, "", nil
		}
		return nil, "", fmt.Errorf("%s: %w", m.c.where("read memo", name), err)
	}
	return b, info.ETag, nil
}

// memoVersion is a memo value's record format, its "v" field; 0 for a
// value without one or that does not decode (a corrupt value, replaced).
func memoVersion(b []byte) int {
	var v struct {
		V int `json:"v"`
	}
	if json.Unmarshal(b, &v) != nil {
		return 0
	}
	return v.V
}
