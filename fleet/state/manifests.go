package state

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"

	"github.com/cachesvc/cachesvc/manifest"
)

// DefaultMaxPartBytes is the default bound on one part read: the
// recorder's default 50,000 keys of a run at about 400 bytes each.
const DefaultMaxPartBytes = 32 << 20

// Manifests is manifest.Shared on the bucket: runs/<ns>/<run>/<replica>.json,
// one object per replica and run, overwritten at each flush. Create one
// with Client.Manifests and pass it as manifest.Config.Shared.
type Manifests struct {
	c        *Client
	maxBytes int64
}

var _ manifest.Shared = (*Manifests)(nil)

// Manifests returns the run manifest backend of the bucket. maxPartBytes
// bounds one part read (a larger object is skipped as damaged); 0 means
// DefaultMaxPartBytes.
func (c *Client) Manifests(maxPartBytes int64) *Manifests {
	if maxPartBytes <= 0 {
		maxPartBytes = DefaultMaxPartBytes
	}
	return &Manifests{c: c, maxBytes: maxPartBytes}
}

func (m *Manifests) dir(ns, run string) string {
	return m.c.cfg.Prefix + "runs/" + ns + "/" + run + "/"
}

// PutPart overwrites the replica's part of the run.
func (m *Manifests) PutPart(ctx context.Context, p manifest.Part) error {
	js, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode run part: %w", err)
	}
	name := m.dir(p.Namespace, p.Run) + p.Replica + ".json"
	_, err = m.c.core.PutObject(ctx, m.c.cfg.Bucket, name, bytes.NewReader(js), int64(len(js)), "", "",
		minio.PutObjectOptions{ContentType: "application/json", DisableMultipart: true})
	if err != nil {
		return fmt.Errorf("%s: %w", m.c.where("put run part", name), err)
	}
	return nil
}

// partReads bounds the parts one Parts call reads at once.
const partReads = 8

// Parts lists the run's parts and reads at most max of them. A part that
// vanished since the listing is skipped; one that does not decode, or is
// over the byte bound, is skipped with a warning (the next flush of its
// replica replaces it).
func (m *Manifests) Parts(ctx context.Context, ns, run string, max int) ([]manifest.Part, bool, error) {
	dir := m.dir(ns, run)
	var names []string
	more := false
	lctx, stop := context.WithCancel(ctx) // ends the listing goroutine on an early break
	defer stop()
	for obj := range m.c.core.Client.ListObjects(lctx, m.c.cfg.Bucket, minio.ListObjectsOptions{Prefix: dir}) {
		if obj.Err != nil {
			return nil, false, fmt.Errorf("%s: %w", m.c.where("list run parts", dir), obj.Err)
		}
		if m.c.onListed != nil {
			m.c.onListed(obj.Key)
		}
		if !strings.HasSuffix(obj.Key, ".json") || strings.Contains(obj.Key[len(dir):], "/") {
			continue
		}
		if len(names) == max {
			more = true
			break
		}
		names = append(names, obj.Key)
	}
	// minio-go ends a listing whose ctx ended between two pages without
	// an error: without this check a cancelled listing passed for a
	// shorter finished one.
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("%s: %w", m.c.where("list run parts", dir), err)
	}
	parts := make([]manifest.Part, len(names))
	ok := make([]bool, len(names))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(partReads)
	for i, name := range names {
		g.Go(func() error {
			p, found, err := m.read(gctx, name)
			parts[i], ok[i] = p, found
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, false, err
	}
	out := parts[:0]
	for i, p := range parts {
		if ok[i] {
			out = append(out, p)
		}
	}
	return out, more, nil
}

func (m *Manifests) read(ctx context.Context, name string) (manifest.Part, bool, error) {
	rc, _, _, err := m.c.core.GetObject(ctx, m.c.cfg.Bucket, name, minio.GetObjectOptions{})
	if err != nil {
		if isMiss(err) {
			return manifest.Part{}, false, nil
		}
		return manifest.Part{}, false, fmt.Errorf("%s: %w", m.c.where("get run part", name), err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, m.maxBytes+1))
	if err != nil {
		if isMiss(err) {
			return manifest.Part{}, false, nil
		}
		return manifest.Part{}, false, fmt.Errorf("%s: %w", m.c.where("read run part", name), err)
	}
	var p manifest.Part
	if int64(len(b)) > m.maxBytes || json.Unmarshal(b, &p) != nil {
		m.c.log.Warn("skipping a damaged or oversized run part", "object", name, "bytes", len(b))
		return manifest.Part{}, false, nil
	}
	return p, true, nil
}
