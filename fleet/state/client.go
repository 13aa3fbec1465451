// Package state keeps a fleet's shared per-process state on the S3 bucket
// its replicas already share: compile leases (lease.Shared), run manifests
// (manifest.Shared) and the signature memo (keying.SharedMemo). Each type
// here is a thin adapter from one of those consumer-declared interfaces to
// S3 objects; the policy (expiry, merging, validation) stays in the
// consuming package, so a replica without S3 behaves exactly as before.
//
// # Object layout
//
// Under Config.Prefix, beside the store's blobs/ and entries/:
//
//	leases/<ns>/<key hex>                      one compile lease: JSON {holder, expires, nonce}
//	runs/<ns>/<run>/<replica id>.json          one replica's records of one run, overwritten
//	memo/<plugin@version>/<code>/<sha256 hex>  one signature's keying result (digest of the raw signature)
//	                                           by one build of the plugin (code: its wasm's SHA-256, hex)
//
// Leases are created with If-None-Match: * and replaced or deleted with
// If-Match on the ETag last read, so two replicas never both win one
// change. Every lease write carries a random nonce: the ETag of a
// single-part object is the MD5 of its bytes, and without the nonce two
// writes of the same holder and expiry would share an ETag and a stale
// If-Match could succeed. Memo values are created the same way and replaced
// with If-Match, never when the value there is of a newer record format (a
// newer replica's, in a rolling upgrade); a lease record of a newer format
// whose expiry this build cannot read is a fault, not a lapsed lease to take
// over.
//
// # Its client
//
// New builds its minio client with s3.NewClient, as the store does, with
// fewer retries and a transport of its own: minio-go has no way to send If-Match on a
// DELETE, so the client's transport adds the header from the request's
// context (see withIfMatch); S3 ignores unsigned ordinary headers in the
// signature, and AWS S3 and versitygw honour If-Match on DeleteObject.
package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/cachesvc/cachesvc/store/s3"
	"github.com/minio/minio-go/v7"
)

// DefaultMaxRetries is the retries New gives a config that sets none:
// state requests sit on the request path (a lease before a compile), so an
// unreachable server must fail them fast and let the caller fail open.
const DefaultMaxRetries = 1

// Client is a connection to the fleet's bucket shared by the adapters. It
// is safe for concurrent use.
type Client struct {
	cfg  s3.Config
	core minio.Core
	log  *slog.Logger

	// onListed, when set (tests only, before any listing), sees each
	// object Manifests.Parts lists, so a test can cancel between two
	// pages.
	onListed func(key string)
}

// New builds a client for the bucket the replicas' store uses (cfg is the
// store's s3.Config; its store-only fields are ignored). It sends no
// request: a fleet whose bucket is down at start still serves, and each
// adapter fails open on its own terms.
func New(cfg s3.Config) (*Client, error) {
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, errors.New("new fleet state client: endpoint and bucket are required")
	}
	if cfg.Prefix != "" && !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	rt := cfg.Transport
	if rt == nil {
		tr, err := minio.DefaultTransport(!cfg.Insecure)
		if err != nil {
			return nil, fmt.Errorf("new fleet state client: %w", err)
		}
		rt = tr
	}
	ccfg := cfg
	ccfg.Transport = ifMatchTransport{rt}
	c, err := s3.NewClient(ccfg)
	if err != nil {
		return nil, fmt.Errorf("new fleet state client: %w", err)
	}
	return &Client{cfg: cfg, core: minio.Core{Client: c}, log: cfg.Logger}, nil
}

// Bucket returns the bucket's name.
func (c *Client) Bucket() string { return c.cfg.Bucket }

// Prefix returns the object name prefix, with its trailing "/".
func (c *Client) Prefix() string { return c.cfg.Prefix }

type ifMatchKey struct{}

// withIfMatch makes the DELETE sent with ctx conditional on etag.
func withIfMatch(ctx context.Context, etag string) context.Context {
	return context.WithValue(ctx, ifMatchKey{}, etag)
}

// ifMatchTransport adds If-Match to a DELETE whose context carries an ETag.
// The header is added after minio signed the request; SigV4 only requires
// the headers it lists (and every x-amz-* one) to be signed.
type ifMatchTransport struct{ next http.RoundTripper }

func (t ifMatchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	etag, ok := req.Context().Value(ifMatchKey{}).(string)
	if !ok || req.Method != http.MethodDelete {
		return t.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("If-Match", `"`+strings.Trim(etag, `"`)+`"`)
	return t.next.RoundTrip(req)
}

// status is the HTTP status of an S3 answer, 0 when none came (a transport
// error, a timeout).
func status(err error) int { return minio.ToErrorResponse(err).StatusCode }

// isMiss reports whether err says the object does not exist.
func isMiss(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.Code == "NoSuchKey" || r.StatusCode == http.StatusNotFound && r.Code != "NoSuchBucket"
}

// isPrecondition reports whether err is a refused conditional write: 412,
// or 409 (AWS answers so while another conditional write of the key is in
// flight).
func isPrecondition(err error) bool {
	s := status(err)
	return s == http.StatusPreconditionFailed || s == http.StatusConflict
}

// where names an object for error messages.
func (c *Client) where(op, object string) string {
	return fmt.Sprintf("%s s3://%s/%s", op, c.cfg.Bucket, object)
}
