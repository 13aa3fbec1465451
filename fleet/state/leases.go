package state

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/lease"
)

// Leases is lease.Shared on the bucket: one object per lease,
// leases/<ns>/<key hex>, written only conditionally (see the package doc).
// Create one with Client.Leases and pass it as lease.Config.Shared.
type Leases struct{ c *Client }

var _ lease.Shared = (*Leases)(nil)

// Leases returns the lease backend of the bucket.
func (c *Client) Leases() *Leases { return &Leases{c: c} }

// leaseRecord is the JSON of a lease object.
type leaseRecord struct {
	Version int    `json:"v"`
	Holder  string `json:"holder"`
	Expires string `json:"expires"` // RFC 3339 with nanoseconds, UTC
	Nonce   string `json:"nonce"`   // makes every write's ETag unique
}

// leaseRecordVersion is the format of the lease records this build writes.
const leaseRecordVersion = 1

// errNewerLease is a lease record of a newer format whose expiry this
// build cannot read: a newer replica's. Load returns it as a fault, so the
// Table fails open instead of taking over a lease that may be live.
var errNewerLease = errors.New("lease record of a newer format than this replica reads (a newer replica's): left as it is, failing open; upgrade this replica")

// maxLeaseBytes bounds a lease read: holders are at most 256 bytes.
const maxLeaseBytes = 4 << 10

func (l *Leases) name(ns string, key cachekey.Key) string {
	return l.c.cfg.Prefix + "leases/" + ns + "/" + key.String()
}

// Load returns the lease record and its ETag, or lease.ErrNotHeld. A record
// that does not decode is returned as a lapsed lease of no holder, so that
// the next Acquire replaces it instead of every caller failing open on it;
// except a record of a newer format ("v") whose expiry does not decode, a
// newer replica's during a rolling upgrade, which is a fault
// (errNewerLease): replacing it could take a live lease from its holder.
func (l *Leases) Load(ctx context.Context, ns string, key cachekey.Key) (lease.Lease, string, error) {
	rec, etag, err := l.load(ctx, ns, key)
	if err != nil {
		return lease.Lease{}, "", err
	}
	if rec.Version > leaseRecordVersion {
		var exp time.Time
		if exp.UnmarshalText([]byte(rec.Expires)) != nil {
			return lease.Lease{}, "", fmt.Errorf("%s: %w", l.c.where("get lease", l.name(ns, key)), errNewerLease)
		}
	}
	return rec.lease(), etag, nil
}

func (l *Leases) load(ctx context.Context, ns string, key cachekey.Key) (leaseRecord, string, error) {
	name := l.name(ns, key)
	rc, info, _, err := l.c.core.GetObject(ctx, l.c.cfg.Bucket, name, minio.GetObjectOptions{})
	if err != nil {
		if isMiss(err) {
			return leaseRecord{}, "", lease.ErrNotHeld
		}
		return leaseRecord{}, "", fmt.Errorf("%s: %w", l.c.where("get lease", name), err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxLeaseBytes))
	if err != nil {
		if isMiss(err) {
			return leaseRecord{}, "", lease.ErrNotHeld
		}
		return leaseRecord{}, "", fmt.Errorf("%s: %w", l.c.where("read lease", name), err)
	}
	var rec leaseRecord
	if json.Unmarshal(b, &rec) != nil {
		rec = leaseRecord{}
	}
	return rec, info.ETag, nil
}

func (r leaseRecord) lease() lease.Lease {
	var l lease.Lease
	if err := l.Expires.UnmarshalText([]byte(r.Expires)); err != nil {
		return lease.Lease{} // lapsed, no holder
	}
	l.Holder = r.Holder
	return l
}

// Create stores the lease with If-None-Match: *; lease.ErrChanged when one
// exists.
func (l *Leases) Create(ctx context.Context, ns string, key cachekey.Key, rec lease.Lease) (string, error) {
	return l.write(ctx, ns, key, "", rec)
}

// Replace stores the lease with If-Match on etag; lease.ErrChanged when the
// object changed or is gone.
func (l *Leases) Replace(ctx context.Context, ns string, key cachekey.Key, etag string, rec lease.Lease) (string, error) {
	return l.write(ctx, ns, key, etag, rec)
}

// write is a conditional PUT: a create when etag is empty, else a replace.
func (l *Leases) write(ctx context.Context, ns string, key cachekey.Key, etag string, in lease.Lease) (string, error) {
	var nonce [12]byte
	_, _ = rand.Read(nonce[:])
	rec := leaseRecord{Version: leaseRecordVersion, Holder: in.Holder, Expires: in.Expires.UTC().Format(time.RFC3339Nano), Nonce: hex.EncodeToString(nonce[:])}
	js, err := json.Marshal(rec)
	if err != nil {
		return "", fmt.Errorf("encode lease: %w", err)
	}
	name := l.name(ns, key)
	opts := minio.PutObjectOptions{ContentType: "application/json", DisableMultipart: true}
	if etag == "" {
		opts.SetMatchETagExcept("*")
	} else {
		opts.SetMatchETag(etag)
	}
	info, err := l.c.core.PutObject(ctx, l.c.cfg.Bucket, name, bytes.NewReader(js), int64(len(js)), "", "", opts)
	switch {
	case err == nil:
		return info.ETag, nil
	case isPrecondition(err) || etag != "" && isMiss(err):
		return "", lease.ErrChanged
	}
	// No answer (a reset connection, a timeout): the write may have landed,
	// and a server may reset a conditional PUT that loses a race rather than
	// answer 412. The nonce says whose record is there now.
	if cur, curTag, lerr := l.load(ctx, ns, key); lerr == nil {
		if cur.Nonce == rec.Nonce {
			return curTag, nil
		}
		if etag == "" || curTag != etag {
			return "", lease.ErrChanged
		}
	}
	return "", fmt.Errorf("%s: %w", l.c.where("put lease", name), err)
}

// Delete removes the lease with If-Match on etag; lease.ErrChanged when it
// changed, nil when it is gone already.
func (l *Leases) Delete(ctx context.Context, ns string, key cachekey.Key, etag string) error {
	name := l.name(ns, key)
	err := l.c.core.RemoveObject(withIfMatch(ctx, etag), l.c.cfg.Bucket, name, minio.RemoveObjectOptions{})
	switch {
	case err == nil || isMiss(err):
		return nil
	case isPrecondition(err):
		return lease.ErrChanged
	}
	return fmt.Errorf("%s: %w", l.c.where("delete lease", name), err)
}
