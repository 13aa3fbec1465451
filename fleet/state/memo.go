package state

import (
	"bytes"
	"context"
	"encoding/hex"
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

// Put overwrites the value: results are deterministic, so a concurrent
// writer stores the same bytes, and overwriting is what replaces a
// corrupt value.
func (m *Memo) Put(ctx context.Context, plugin, code string, digest [32]byte, value []byte) error {
	name := m.name(plugin, code, digest)
	_, err := m.c.core.PutObject(ctx, m.c.cfg.Bucket, name, bytes.NewReader(value), int64(len(value)), "", "",
		minio.PutObjectOptions{ContentType: "application/json", DisableMultipart: true})
	if err != nil {
		return fmt.Errorf("%s: %w", m.c.where("put memo", name), err)
	}
	return nil
}
