// Package s3 is a store.Store on an S3-compatible bucket: the shared,
// durable tier that every replica of a fleet reads and writes (AWS S3, GCS
// interop, Ceph RGW, SeaweedFS, versitygw).
//
// # Object layout
//
// Under Config.Prefix (say "cachesvc/"):
//
//	blobs/<sha256 hex>          the bytes, content-addressed; shared by every entry with them
//	entries/<ns>/<key hex>      the entry record: small immutable JSON (record), naming the blob,
//	                            or holding the bytes themselves for a small entry (inline)
//	uploads/<random hex>        a large body of undeclared digest, while it is uploaded and hashed
//	quarantine/<ns>/<key hex>   the record of an entry whose blob failed its digest
//
// Nothing partial is ever visible. A blob object exists only once its bytes
// are complete and verified: a body that fits one part (Config.PartSize) is
// read into a buffer, hashed, checked, and only then sent in one PUT (which
// also carries the SHA-256 as the signed payload hash, so the server checks
// it); a body of at most Config.InlineMax bytes (64 KiB by default) is not
// a blob object at all but goes, base64, in the record's "data" field (and
// the record's "v" is 2), so that a small entry costs one request to write
// and one to read instead of three and two; a larger body with a declared digest goes to blobs/<digest> as a
// multipart upload that is completed only after the last part is hashed and
// the digest matches (an incomplete multipart upload is not an object);
// a larger body without a declared digest has no name until its last byte,
// so it is uploaded to uploads/<random>, then copied server-side to
// blobs/<digest> and the temporary deleted. The entry record is written
// last, after its blob is complete.
//
// First writer wins: the record is created with If-None-Match: * and the
// server refuses (412) a second create of the same key; the loser reads the
// winner's record and returns Created=false (same digest) or
// store.ErrConflict. Servers without conditional writes can use
// Config.CheckThenWrite, a stat before the write that leaves a window in
// which two concurrent writers of one key both succeed and the later
// record silently replaces the earlier; with identical bytes that is
// harmless, with different bytes one writer gets a wrong 2xx.
//
// # Integrity
//
// An inline entry's bytes are checked against the record's SHA-256 before
// Get returns; a mismatch quarantines the record (there is no blob to
// delete). A Get of the whole blob hashes every byte and withholds the last buffer
// (up to 512 KiB) until the digest matches, so a corrupted object is never
// served complete: the reader returns an error wrapping store.ErrCorrupt
// instead of the final bytes, moves the record under quarantine/, deletes
// the damaged blob (its bytes are not its name, so no entry can use it) and
// counts Usage.IntegrityFailures. An entry record that does not decode
// (damaged in the bucket) is moved under quarantine/ the same way by
// whichever Get, Stat, Put or Walk meets it, so that the key becomes a
// miss that a writer can store afresh. A ranged Get cannot check a whole-blob
// digest without reading the whole blob; it checks the object's length and
// serves the range unverified (the tiered store serves ranges only from its
// verified hot tier).
//
// # What this tier does not do
//
// It counts no accesses (Meta.Hits stays 0 and LastAccess is Created: a
// write per read would cost a request per hit) and evicts nothing: the
// bucket is the durable copy. Delete removes only the record; blobs are
// shared, so one no record names is freed by a later garbage collection
// (cachesvc gc, not yet written), which must leave blobs younger than an
// upload's lifetime alone, since a writer may have just stored or found
// one and not yet written its record. Blobs orphaned by a lost first-writer
// race and uploads/ left by a crashed process go the same way.
//
// # Why minio-go
//
// minio-go v7 is one module with few dependencies, speaks to every
// S3-compatible server with path-style addressing, and its Core type exposes
// the multipart calls (NewMultipartUpload, PutObjectPart,
// CompleteMultipartUpload, AbortMultipartUpload) so that this package owns
// the part buffer (bounded memory) and completes an upload only after
// verifying its digest. PutObjectOptions.SetMatchETagExcept("*") sends
// If-None-Match: *. aws-sdk-go-v2 would do too, but costs a dozen modules and
// by default adds request checksums that several S3-compatible servers
// reject.
package s3

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/cachesvc/cachesvc/store"
)

// Defaults for the zero values of Config fields.
const (
	// DefaultPartSize is the default Config.PartSize.
	DefaultPartSize = 16 << 20
	// MinPartSize is S3's smallest part but the last.
	MinPartSize = 5 << 20
	// DefaultUsageInterval is the default Config.UsageInterval.
	DefaultUsageInterval = 10 * time.Minute
	// DefaultUsageRetry is the default Config.UsageRetry.
	DefaultUsageRetry = 30 * time.Second
	// DefaultMaxRetries is the default Config.MaxRetries.
	DefaultMaxRetries = 3
	// DefaultInlineMax is the default Config.InlineMax.
	DefaultInlineMax = 64 << 10
	// MaxInlineMax bounds Config.InlineMax: a record is read whole.
	MaxInlineMax = 256 << 10
	// DefaultReadTimeout is the default Config.ReadTimeout.
	DefaultReadTimeout = 30 * time.Second
)

// Config configures an S3 store. The zero value of every field except
// Endpoint and Bucket means its default.
type Config struct {
	// Endpoint is the server's host[:port], without a scheme. Required.
	Endpoint string
	// Bucket must exist. Required.
	Bucket string
	// Prefix is prepended to every object name; a missing trailing "/" is
	// added. Several fleets can share a bucket under different prefixes.
	Prefix string
	// Region is the bucket's region; empty lets the client discover it.
	Region string
	// AccessKey and SecretKey (and SessionToken) authenticate requests.
	// When AccessKey is empty the standard AWS sources are tried in turn:
	// AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the shared credentials file
	// (AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials), then instance
	// metadata.
	AccessKey, SecretKey, SessionToken string
	// Insecure talks plain HTTP instead of HTTPS.
	Insecure bool
	// Transport replaces the HTTP transport (tests count requests with it).
	Transport http.RoundTripper
	// MaxRetries bounds the client's retries of a failed request. Default 3,
	// so that an unreachable server fails a request in about a second
	// rather than minio-go's ten retries.
	MaxRetries int

	// MaxEntryBytes bounds one entry's size; 0 means unlimited (S3's own
	// limit is 5 TiB, 10,000 parts of up to 5 GiB).
	MaxEntryBytes int64
	// PartSize is the multipart part size and so the one buffer a Put holds:
	// bodies up to it go in one PUT. Default 16 MiB, at least MinPartSize.
	PartSize int64
	// CheckThenWrite replaces the conditional create of entry records
	// (If-None-Match: *) with a stat before an unconditional write, for
	// servers that lack conditional writes. See the package doc for the race
	// it leaves.
	CheckThenWrite bool
	// InlineMax is the largest entry whose bytes go in its record instead
	// of a blob object (see the package doc); default 64 KiB, at most
	// MaxInlineMax, negative never. Inline entries are not deduplicated.
	InlineMax int64
	// ReadTimeout bounds how long a Get's reader may wait for one buffer
	// (512 KiB, or the body's rest) from the server: a stalled body fails
	// with store.ErrUnavailable instead of hanging its reader (and a tiered
	// store's download). Default 30s; negative never.
	ReadTimeout time.Duration
	// UsageInterval is how often Usage's counts are refreshed by listing the
	// bucket. Default 10m; negative lists only when ScanUsage is called.
	UsageInterval time.Duration
	// UsageRetry is how soon a failed listing is tried again while none
	// has finished (until one does, Usage has no count of the bucket, only
	// this process's writes): a replica started during a short outage of
	// the bucket waited the whole UsageInterval. Default 30s; never more
	// than UsageInterval.
	UsageRetry time.Duration
	// Logger receives the store's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Store is a store.Store on an S3 bucket. It is safe for concurrent use, also
// by many processes on one bucket. Create one with Open.
type Store struct {
	cfg    Config
	core   minio.Core
	log    *slog.Logger
	closed atomic.Bool
	bufs   sync.Pool // *[]byte of PartSize bytes
	rbufs  sync.Pool // *[]byte of readBufSize bytes

	usage usageCounts
	// openErr is why the bucket could not be reached at Open (nil: it
	// answered); see OpenErr.
	openErr error

	stop chan struct{}
	wg   sync.WaitGroup

	// onListed, when set (tests only, before any listing), sees each
	// object a listing yields.
	onListed func(key string)
}

var _ store.Store = (*Store)(nil)

// Open connects to the bucket (checking that it exists) and starts the
// background usage scan.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, fmt.Errorf("open s3 store: %w: endpoint and bucket are required", store.ErrInvalid)
	}
	if cfg.Prefix != "" && !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = DefaultPartSize
	}
	if cfg.PartSize < MinPartSize {
		return nil, fmt.Errorf("open s3 store: %w: part size %d under S3's minimum %d", store.ErrInvalid, cfg.PartSize, MinPartSize)
	}
	if cfg.UsageInterval == 0 {
		cfg.UsageInterval = DefaultUsageInterval
	}
	if cfg.UsageRetry <= 0 {
		cfg.UsageRetry = DefaultUsageRetry
	}
	cfg.UsageRetry = min(cfg.UsageRetry, cfg.UsageInterval)
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.InlineMax == 0 {
		cfg.InlineMax = DefaultInlineMax
	}
	if cfg.InlineMax > MaxInlineMax {
		return nil, fmt.Errorf("open s3 store: %w: inline max %d over %d", store.ErrInvalid, cfg.InlineMax, MaxInlineMax)
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c, err := NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("open s3 store: %w", err)
	}
	s := &Store{cfg: cfg, core: minio.Core{Client: c}, log: cfg.Logger, stop: make(chan struct{})}
	s.bufs.New = func() any { b := make([]byte, cfg.PartSize); return &b }
	s.rbufs.New = func() any { b := make([]byte, readBufSize); return &b }
	switch err := CheckBucket(ctx, c, cfg.Bucket); {
	case err == nil:
	case errors.Is(err, store.ErrUnavailable):
		// A replica restarted during an outage of the shared tier still
		// serves its hot tier; configuration errors (no such bucket, bad
		// credentials) answer now and stop the start.
		cfg.Logger.Warn("shared tier unreachable at start; serving the hot tier until it answers",
			"endpoint", cfg.Endpoint, "bucket", cfg.Bucket, "err", err)
		s.openErr = fmt.Errorf("open bucket s3://%s: %w", cfg.Bucket, err)
	default:
		return nil, fmt.Errorf("open s3 store: %w", err)
	}
	if cfg.UsageInterval > 0 {
		s.wg.Add(1)
		go s.usageLoop()
	}
	return s, nil
}

// NewClient returns a minio client for cfg's endpoint, the one every user
// of the fleet's bucket builds (the store, fleet/registry, fleet/state):
// path-style addressing (every S3-compatible server supports it),
// cfg.MaxRetries retries (DefaultMaxRetries when 0) and, when cfg.AccessKey
// is empty, the standard AWS credential sources in turn
// (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, the shared credentials file
// AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, instance metadata).
// It sends no request.
func NewClient(cfg Config) (*minio.Client, error) {
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	creds := credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)
	if cfg.AccessKey == "" {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.FileAWSCredentials{},
			&credentials.IAM{},
		})
	}
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:        creds,
		Secure:       !cfg.Insecure,
		Transport:    cfg.Transport,
		Region:       cfg.Region,
		BucketLookup: minio.BucketLookupPath,
		MaxRetries:   cfg.MaxRetries,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", cfg.Endpoint, err)
	}
	return c, nil
}

// Object names (see the package doc).
func (s *Store) blobName(sha [32]byte) string {
	return s.cfg.Prefix + "blobs/" + hex.EncodeToString(sha[:])
}

func (s *Store) entryName(ns string, key store.Key) string {
	return s.cfg.Prefix + "entries/" + ns + "/" + key.String()
}

func (s *Store) quarantineName(ns string, key store.Key) string {
	return s.cfg.Prefix + "quarantine/" + ns + "/" + key.String()
}

// fault wraps an S3 error with the operation and object: a miss becomes
// store.ErrNotFound; an unreachable server, a 5xx, refused credentials or a
// missing bucket store.ErrUnavailable (the last two saying what to fix).
func (s *Store) fault(op, object string, err error) error {
	where := fmt.Sprintf("%s s3://%s/%s", op, s.cfg.Bucket, object)
	if callerEnded(err) {
		return fmt.Errorf("%s: %w", where, err)
	}
	switch {
	case isNotFound(err):
		return fmt.Errorf("%s: %w", where, store.ErrNotFound)
	case isUnavailable(err):
		return fmt.Errorf("%s: %w: %w", where, store.ErrUnavailable, withoutURL(err))
	case credentialsRefused(err):
		// Keys rotated or revoked, a policy changed: the tier is as
		// unusable as when it is down (503, /readyz degraded, hot entries
		// still served, queued uploads retried), not an internal error.
		return fmt.Errorf("%s: %w: the server refused the credentials: %s: %w", where, store.ErrUnavailable, checkCredentials, err)
	case minio.ToErrorResponse(err).Code == "NoSuchBucket":
		return fmt.Errorf("%s: %w: the bucket does not exist: create it (cachesvc creates no buckets) or check --s3-bucket: %w", where, store.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// withoutURL is err less the method and URL a *url.Error puts before its
// cause (`Get "http://host/bucket/entries/ns/KEY": dial tcp ...`): fault's
// caller names the object already, and the URL made a 503's message repeat
// the key once more.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err
	}
	return err
}

// callerEnded reports whether err is the caller's context ending
// (canceled, or past its deadline) rather than the server failing to
// answer. net/http's own timeouts (awaiting response headers, dialing)
// also match context.DeadlineExceeded by errors.Is, but they are an
// outage: only the sentinel itself, in err's chain, is the caller's.
func callerEnded(err error) bool {
	if errors.Is(err, context.Canceled) {
		return true
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var walk func(error) bool
	walk = func(e error) bool {
		if e == context.DeadlineExceeded { // the sentinel itself, not what matches it
			return true
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			return u.Unwrap() != nil && walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(err)
}

// isNotFound reports whether err is S3's answer that an object is missing
// (not a bucket).
func isNotFound(err error) bool {
	resp := minio.ToErrorResponse(err)
	return resp.Code == "NoSuchKey" || resp.StatusCode == http.StatusNotFound && resp.Code != "NoSuchBucket"
}

// isUnavailable reports whether err means the server could not answer now:
// no HTTP answer at all (unreachable, refused, reset) or a 5xx.
func isUnavailable(err error) bool {
	resp := minio.ToErrorResponse(err)
	return resp.StatusCode == 0 || resp.StatusCode >= 500
}

func (s *Store) enter() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// record is the JSON of an entry record: the entry's Meta, less what this
// tier does not keep (hits, last access).
type record struct {
	Version        int               `json:"v"`
	Namespace      string            `json:"namespace"`
	Key            string            `json:"key"`
	Size           int64             `json:"size"`
	SHA256         string            `json:"sha256"`
	Created        time.Time         `json:"created"`
	Backend        string            `json:"backend,omitempty"`
	Name           string            `json:"name,omitempty"`
	CompileSeconds float64           `json:"compile_seconds,omitempty"`
	Writer         string            `json:"writer,omitempty"`
	Run            string            `json:"run,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Components     map[string]string `json:"components,omitempty"`
	// Data is an inline entry's bytes (base64 in JSON); nil for an entry
	// in a blob object. An empty inline entry has "data": "".
	Data *[]byte `json:"data,omitempty"`
}

// maxRecordBytes bounds a record read: labels and components are bounded,
// so a larger object is not a record.
const maxRecordBytes = 1 << 20

// encodeRecord encodes m's record; inline, when non-nil, is the entry's
// bytes to carry in it.
func encodeRecord(m store.Meta, inline []byte) ([]byte, error) {
	v := 1
	var data *[]byte
	if inline != nil {
		v, data = 2, &inline
	}
	return json.Marshal(record{
		Data: data, Version: v, Namespace: m.Namespace, Key: m.Key.String(), Size: m.Size,
		SHA256: hex.EncodeToString(m.SHA256[:]), Created: m.Created, Backend: m.Backend, Name: m.Name,
		CompileSeconds: m.CompileSeconds, Writer: m.Writer, Run: m.Run, Labels: m.Labels, Components: m.Components,
	})
}

// MaxRecordVersion is the newest entry record ("v") this binary reads: 1,
// a record naming its blob object; 2, a record carrying its bytes inline.
// A newer replica of a fleet may write a version this one does not know.
const MaxRecordVersion = 2

// decodeRecord decodes a record and returns the entry's inline bytes, nil
// when it has a blob object. A record of a version newer than
// MaxRecordVersion is an error wrapping store.ErrNewerFormat, whether or not
// it would decode: it is not damage, and it must not be quarantined.
func decodeRecord(ns string, key store.Key, b []byte) (store.Meta, []byte, error) {
	var ver struct {
		V json.Number `json:"v"`
	}
	if json.Unmarshal(b, &ver) == nil {
		if v, err := ver.V.Int64(); err == nil && v > MaxRecordVersion {
			return store.Meta{}, nil, fmt.Errorf("entry record %s/%s is of version %d, written by a newer cachesvc; this one reads version %d at most: "+
				"upgrade this replica (the record is left as it is): %w", ns, key, v, MaxRecordVersion, store.ErrNewerFormat)
		}
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return store.Meta{}, nil, fmt.Errorf("decode entry record: %w", err)
	}
	sum, err := hex.DecodeString(r.SHA256)
	if err != nil || len(sum) != 32 || r.Size < 0 {
		return store.Meta{}, nil, fmt.Errorf("decode entry record: bad sha256 %q or size %d", r.SHA256, r.Size)
	}
	var inline []byte
	if r.Data != nil {
		inline = *r.Data
		if inline == nil {
			inline = []byte{}
		}
	}
	m := store.Meta{
		Namespace: ns, Key: key, Size: r.Size, Created: r.Created, LastAccess: r.Created,
		Backend: r.Backend, Name: r.Name, CompileSeconds: r.CompileSeconds, Writer: r.Writer, Run: r.Run,
		Labels: r.Labels, Components: r.Components,
	}
	copy(m.SHA256[:], sum)
	return m, inline, nil
}

// readRecord fetches and decodes the entry record of (ns, key).
func (s *Store) readRecord(ctx context.Context, ns string, key store.Key) (store.Meta, error) {
	m, _, err := s.readRecordData(ctx, ns, key)
	return m, err
}

// readRecordData fetches and decodes the entry record of (ns, key), with
// an inline entry's bytes.
func (s *Store) readRecordData(ctx context.Context, ns string, key store.Key) (store.Meta, []byte, error) {
	name := s.entryName(ns, key)
	rc, _, _, err := s.core.GetObject(ctx, s.cfg.Bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return store.Meta{}, nil, s.fault("get entry record", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxRecordBytes))
	if err != nil {
		return store.Meta{}, nil, s.fault("read entry record", name, err)
	}
	m, inline, err := decodeRecord(ns, key, b)
	if errors.Is(err, store.ErrNewerFormat) {
		s.log.Warn("entry record written by a newer cachesvc; left as it is: upgrade this replica",
			"namespace", ns, "key", key.String(), "object", name, "err", err)
		return store.Meta{}, nil, fmt.Errorf("s3://%s/%s: %w", s.cfg.Bucket, name, err)
	}
	if err != nil {
		return store.Meta{}, nil, s.quarantineRecord(ns, key, err)
	}
	return m, inline, nil
}

// quarantineRecord moves an entry record that does not decode (damaged in
// the bucket: records are written whole, once) under quarantine/, as a
// corrupt blob's record is, so that the key is a miss on every replica
// and a writer's next Put stores it afresh, instead of every read, write
// and listing of it failing for good. It returns an error wrapping
// store.ErrCorrupt.
func (s *Store) quarantineRecord(ns string, key store.Key, why error) error {
	s.usage.integrity.Add(1)
	rec := s.entryName(ns, key)
	s.log.Error("s3 entry record does not decode; quarantined", "namespace", ns, "key", key.String(),
		"object", rec, "reason", why)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.core.CopyObject(ctx, s.cfg.Bucket, rec, s.cfg.Bucket, s.quarantineName(ns, key), nil,
		minio.CopySrcOptions{}, minio.PutObjectOptions{}); err != nil {
		s.log.Warn("copy record to quarantine failed", "object", rec, "err", err)
	}
	if err := s.core.RemoveObject(ctx, s.cfg.Bucket, rec, minio.RemoveObjectOptions{}); err != nil {
		s.log.Warn("remove quarantined record failed", "object", rec, "err", err)
	} else {
		s.usage.add(-1, 0, 0)
	}
	return fmt.Errorf("read entry %s/%s: s3://%s/%s: %w: %w", ns, key, s.cfg.Bucket, rec, why, store.ErrCorrupt)
}

// OpenErr returns why the bucket could not be reached when the store was
// opened (an error wrapping store.ErrUnavailable), or nil when it answered,
// so that a tiered store in front of it does not start out calling it
// reachable.
func (s *Store) OpenErr() error { return s.openErr }

// Stat returns the entry's metadata from its record.
func (s *Store) Stat(ctx context.Context, ns string, key store.Key) (store.Meta, error) {
	if err := store.CheckNamespace("stat entry", ns); err != nil {
		return store.Meta{}, err
	}
	if err := s.enter(); err != nil {
		return store.Meta{}, err
	}
	return s.readRecord(ctx, ns, key)
}

// Delete removes the entry's record. Its blob stays until a garbage
// collection finds no record naming it (blobs are shared between entries).
// A miss returns store.ErrNotFound.
func (s *Store) Delete(ctx context.Context, ns string, key store.Key) error {
	if err := store.CheckNamespace("delete entry", ns); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	name := s.entryName(ns, key)
	info, err := s.core.StatObject(ctx, s.cfg.Bucket, name, minio.StatObjectOptions{})
	if err != nil {
		return s.fault("delete entry", name, err)
	}
	if err := s.core.RemoveObject(ctx, s.cfg.Bucket, name, minio.RemoveObjectOptions{}); err != nil {
		return s.fault("delete entry", name, err)
	}
	s.usage.add(-1, 0, -info.Size)
	return nil
}

// Close stops the usage scan. Readers still open fail with store.ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.stop)
	s.wg.Wait()
	return nil
}
