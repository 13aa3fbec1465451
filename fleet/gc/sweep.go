package gc

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/fleet/registry"
	"github.com/cachesvc/cachesvc/store"
	"github.com/cachesvc/cachesvc/store/s3"
)

// Paging: records of used entries are read recordPage at a time with
// recordFetchers requests in flight; deletes go deleteBatch names per
// request (S3's multi-object delete takes up to 1,000).
const (
	recordPage     = 256
	recordFetchers = 8
	deleteBatch    = 1000
	progressEvery  = 256
	maxRecordBytes = 1 << 20
	maxLeaseBytes  = 64 << 10
)

// accessHash is the accessed set's key for (ns, key): 8 bytes of a SHA-256.
func accessHash(ns string, key store.Key) uint64 {
	h := sha256.New()
	h.Write([]byte(ns))
	h.Write([]byte{0})
	h.Write(key[:])
	var sum [32]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}

// blobHash is the referenced set's key for a blob: its digest's first 8
// bytes (digests are uniform already).
func blobHash(sha [32]byte) uint64 { return binary.BigEndian.Uint64(sha[:8]) }

// progress tracks one phase's counts for Config.Progress.
type progress struct {
	g                 *run
	phase             string
	examined, removed int64
}

func (g *run) phase(name string) *progress { return &progress{g: g, phase: name} }

func (p *progress) tick(removed bool) {
	p.examined++
	if removed {
		p.removed++
	}
	if p.examined%progressEvery == 0 {
		p.report()
	}
}

func (p *progress) report() {
	if p.g.cfg.Progress != nil {
		p.g.cfg.Progress(Progress{Phase: p.phase, Examined: p.examined, Removed: p.removed})
	}
}

// list calls fn for every object under prefix (recursive), streaming.
func (g *run) list(ctx context.Context, prefix string, fn func(minio.ObjectInfo) error) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for obj := range g.b.Client.ListObjects(lctx, g.b.Name, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return fmt.Errorf("gc: list s3://%s/%s: %w", g.b.Name, prefix, obj.Err)
		}
		if err := fn(obj); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// deleter batches deletes (none in a dry run). Flush before trusting that
// what was added is gone.
type deleter struct {
	g     *run
	names []string
}

func (d *deleter) add(ctx context.Context, name string) error {
	if d.g.cfg.DryRun {
		return nil
	}
	d.names = append(d.names, name)
	if len(d.names) >= deleteBatch {
		return d.flush(ctx)
	}
	return nil
}

func (d *deleter) flush(ctx context.Context) error {
	if len(d.names) == 0 {
		return nil
	}
	ch := make(chan minio.ObjectInfo, len(d.names))
	for _, n := range d.names {
		ch <- minio.ObjectInfo{Key: n}
	}
	close(ch)
	d.names = d.names[:0]
	var first error
	for e := range d.g.b.Client.RemoveObjects(ctx, d.g.b.Name, ch, minio.RemoveObjectsOptions{}) {
		if e.Err != nil && !isNotFound(e.Err) && first == nil {
			first = fmt.Errorf("gc: delete s3://%s/%s: %w", d.g.b.Name, e.ObjectName, e.Err)
		}
	}
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// isNotFound reports whether err, or an error it wraps, is S3's answer for
// a missing object (minio.ToErrorResponse does not unwrap).
func isNotFound(err error) bool {
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) {
		return false
	}
	return resp.Code == "NoSuchKey" || resp.StatusCode == 404 && resp.Code != "NoSuchBucket"
}

// get reads at most limit bytes of object name.
func (g *run) get(ctx context.Context, name string, limit int64) ([]byte, error) {
	obj, err := g.b.Client.GetObject(ctx, g.b.Name, name, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("gc: read s3://%s/%s: %w", g.b.Name, name, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(io.LimitReader(obj, limit))
	if err != nil {
		return nil, fmt.Errorf("gc: read s3://%s/%s: %w", g.b.Name, name, err)
	}
	return b, nil
}

// readAccess reads the access logs written since cutoff into the accessed
// set and deletes the older ones.
func (g *run) readAccess(ctx context.Context, cutoff time.Time) (map[uint64]struct{}, error) {
	p := g.phase(PhaseAccess)
	defer p.report()
	accessed := map[uint64]struct{}{}
	del := &deleter{g: g}
	err := g.list(ctx, g.b.AccessPrefix(""), func(obj minio.ObjectInfo) error {
		if obj.LastModified.Before(cutoff) {
			p.tick(true)
			g.rep.AccessLogsRemoved++
			return del.add(ctx, obj.Key)
		}
		p.tick(false)
		o, err := g.b.Client.GetObject(ctx, g.b.Name, obj.Key, minio.GetObjectOptions{})
		if err != nil {
			return fmt.Errorf("gc: read s3://%s/%s: %w", g.b.Name, obj.Key, err)
		}
		defer o.Close()
		err = registry.DecodeAccess(o, func(ns string, key store.Key) { accessed[accessHash(ns, key)] = struct{}{} })
		if isNotFound(err) {
			return nil // deleted by another gc since the listing
		}
		if err != nil {
			// A log that cannot be read may name entries in use: stop
			// rather than delete them.
			return fmt.Errorf("gc: s3://%s/%s: %w", g.b.Name, obj.Key, err)
		}
		g.rep.AccessLogsRead++
		return nil
	})
	if err != nil {
		return nil, err
	}
	return accessed, del.flush(ctx)
}

// markEntries lists the records, deletes the unused and returns the sorted
// referenced set of the used.
func (g *run) markEntries(ctx context.Context, cutoff time.Time, accessed map[uint64]struct{}) ([]uint64, error) {
	p := g.phase(PhaseEntries)
	defer p.report()
	prefix := g.b.Prefix + EntriesDir
	del := &deleter{g: g}
	var refs []uint64
	page := make([]string, 0, recordPage)
	err := g.list(ctx, prefix, func(obj minio.ObjectInfo) error {
		ns, hexKey, ok := strings.Cut(strings.TrimPrefix(obj.Key, prefix), "/")
		key, err := cachekey.ParseKey(hexKey)
		if !ok || err != nil || cachekey.ValidateNamespace(ns) != nil {
			return nil // not a record of store/s3's
		}
		used := !obj.LastModified.Before(cutoff)
		if !used {
			if _, ok := accessed[accessHash(ns, key)]; ok {
				used = true
				g.rep.EntriesAccessed++
			}
		}
		p.tick(!used)
		if !used {
			g.rep.EntriesRemoved++
			return del.add(ctx, obj.Key)
		}
		g.rep.EntriesKept++
		if page = append(page, obj.Key); len(page) == recordPage {
			refs, err = g.readDigests(ctx, page, refs)
			page = page[:0]
		}
		return err
	})
	if err == nil {
		refs, err = g.readDigests(ctx, page, refs)
	}
	if err == nil {
		err = del.flush(ctx) // before the blob sweep: a record that failed to go must keep its blob
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(refs)
	return slices.Compact(refs), nil
}

// readDigests reads the records named in page and appends their blobs'
// hashes to refs. A record gone since the listing is skipped; one that does
// not decode is counted and kept.
func (g *run) readDigests(ctx context.Context, page []string, refs []uint64) ([]uint64, error) {
	out := make([]uint64, len(page))
	found := make([]bool, len(page))
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(recordFetchers)
	unreadable := make([]bool, len(page))
	for i, name := range page {
		eg.Go(func() error {
			js, err := g.get(ectx, name, maxRecordBytes)
			if err != nil {
				if isNotFound(err) {
					return nil
				}
				return err
			}
			var rec struct {
				V      json.Number `json:"v"`
				SHA256 string      `json:"sha256"`
			}
			sum, derr := []byte(nil), json.Unmarshal(js, &rec)
			if v, err := rec.V.Int64(); err == nil && v > s3.MaxRecordVersion {
				// A newer cachesvc's record may name its bytes some way
				// this gc does not know: sweeping blobs now could delete
				// them. Stop before any blob is touched.
				return fmt.Errorf("entry record %s is of version %d, written by a newer cachesvc; this gc reads version %d at most and cannot tell which blobs it uses: "+
					"run the gc of the cachesvc that wrote it (no blob was removed): %w", name, v, s3.MaxRecordVersion, store.ErrNewerFormat)
			}
			if derr == nil {
				sum, derr = hex.DecodeString(rec.SHA256)
			}
			if derr != nil || len(sum) != 32 {
				unreadable[i] = true
				return nil
			}
			out[i], found[i] = blobHash([32]byte(sum)), true
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return refs, err
	}
	for i := range page {
		if found[i] {
			refs = append(refs, out[i])
		}
		if unreadable[i] {
			g.rep.EntriesUnreadable++
			// page holds only names markEntries parsed as entries/<ns>/<key>.
			ns, key, _ := strings.Cut(strings.TrimPrefix(page[i], g.b.Prefix+EntriesDir), "/")
			g.log.Warn("gc: entry record does not decode; kept, its blob is not protected",
				"namespace", ns, "key", key, "object", page[i])
		}
	}
	return refs, nil
}

// sweepBlobs deletes blobs not in refs (sorted) written before grace.
func (g *run) sweepBlobs(ctx context.Context, refs []uint64, grace time.Time) error {
	p := g.phase(PhaseBlobs)
	defer p.report()
	prefix := g.b.Prefix + BlobsDir
	del := &deleter{g: g}
	err := g.list(ctx, prefix, func(obj minio.ObjectInfo) error {
		sum, err := hex.DecodeString(strings.TrimPrefix(obj.Key, prefix))
		if err != nil || len(sum) != 32 {
			return nil // not a blob of store/s3's
		}
		_, referenced := slices.BinarySearchFunc(refs, blobHash([32]byte(sum)), cmp.Compare[uint64])
		if referenced || !obj.LastModified.Before(grace) {
			if !referenced {
				g.rep.BlobsYoung++
			}
			p.tick(false)
			g.rep.BlobsKept++
			g.rep.BytesKept += obj.Size
			return nil
		}
		p.tick(true)
		g.rep.BlobsRemoved++
		g.rep.BytesRemoved += obj.Size
		return del.add(ctx, obj.Key)
	})
	if err != nil {
		return err
	}
	return del.flush(ctx)
}

// sweepUploads deletes temporary uploads written before grace.
func (g *run) sweepUploads(ctx context.Context, grace time.Time) error {
	return g.sweepOlder(ctx, PhaseUploads, UploadsDir, grace, &g.rep.UploadsRemoved)
}

// sweepOlder deletes the objects under dir last written before cutoff,
// counting them in *removed.
func (g *run) sweepOlder(ctx context.Context, phase, dir string, cutoff time.Time, removed *int64) error {
	p := g.phase(phase)
	defer p.report()
	del := &deleter{g: g}
	err := g.list(ctx, g.b.Prefix+dir, func(obj minio.ObjectInfo) error {
		old := obj.LastModified.Before(cutoff)
		p.tick(old)
		if !old {
			return nil
		}
		*removed++
		return del.add(ctx, obj.Key)
	})
	if err != nil {
		return err
	}
	return del.flush(ctx)
}

// abortMultipart aborts incomplete multipart uploads under the prefix begun
// before grace (each by its upload id: a younger upload of the same object
// may be in flight).
func (g *run) abortMultipart(ctx context.Context, grace time.Time) error {
	p := g.phase(PhaseMultipart)
	defer p.report()
	core := minio.Core{Client: g.b.Client}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for u := range g.b.Client.ListIncompleteUploads(lctx, g.b.Name, g.b.Prefix, true) {
		if u.Err != nil {
			return fmt.Errorf("gc: list multipart uploads s3://%s/%s: %w", g.b.Name, g.b.Prefix, u.Err)
		}
		old := u.Initiated.Before(grace)
		p.tick(old)
		if !old {
			continue
		}
		g.rep.MultipartAborted++
		if g.cfg.DryRun {
			continue
		}
		if err := core.AbortMultipartUpload(ctx, g.b.Name, u.Key, u.UploadID); err != nil && !isNotFound(err) {
			return fmt.Errorf("gc: abort multipart upload %s of s3://%s/%s: %w", u.UploadID, g.b.Name, u.Key, err)
		}
	}
	return ctx.Err()
}

// sweepLeases deletes lease objects expired before grace. A lease object is
// JSON with an "expires" time (as wire.LeaseResponse); one without a
// readable expiry is taken to expire Config.LeaseTTLBound after it was
// written.
func (g *run) sweepLeases(ctx context.Context, grace time.Time) error {
	p := g.phase(PhaseLeases)
	defer p.report()
	del := &deleter{g: g}
	err := g.list(ctx, g.b.Prefix+LeasesDir, func(obj minio.ObjectInfo) error {
		expires := obj.LastModified.Add(g.cfg.LeaseTTLBound)
		if expires.Before(grace) {
			// Expired whatever it says (no lease outlives the bound): no read.
		} else if js, err := g.get(ctx, obj.Key, maxLeaseBytes); err == nil {
			var l struct {
				Expires time.Time `json:"expires"`
			}
			if json.Unmarshal(js, &l) == nil && !l.Expires.IsZero() {
				expires = l.Expires
			}
		} else if !isNotFound(err) {
			return err
		}
		old := expires.Before(grace)
		p.tick(old)
		if !old {
			return nil
		}
		g.rep.LeasesRemoved++
		return del.add(ctx, obj.Key)
	})
	if err != nil {
		return err
	}
	return del.flush(ctx)
}

// sweepReplicas deletes heartbeat objects written before gone.
func (g *run) sweepReplicas(ctx context.Context, gone time.Time) error {
	p := g.phase(PhaseReplicas)
	defer p.report()
	del := &deleter{g: g}
	err := g.list(ctx, g.b.Prefix+registry.ReplicasDir, func(obj minio.ObjectInfo) error {
		old := obj.LastModified.Before(gone)
		p.tick(old)
		if !old {
			return nil
		}
		g.rep.ReplicasRemoved++
		return del.add(ctx, obj.Key)
	})
	if err != nil {
		return err
	}
	return del.flush(ctx)
}
