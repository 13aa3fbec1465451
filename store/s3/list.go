package s3

import (
	"context"
	"errors"

	"github.com/minio/minio-go/v7"
)

// errStopListing, returned by list's fn, ends the listing early without an
// error.
var errStopListing = errors.New("stop listing")

// list calls fn with each object of the bucket's listing opts, in key
// order, until fn returns an error (errStopListing: stop, no error) or the
// listing ends. A listing error is wrapped by fault with what and the
// prefix.
//
// A listing that ended because ctx did is an error, never a short
// success: minio-go closes the listing without one when ctx ends between
// two pages (listObjectsV2 checks ctx before each request and returns), so
// a range over ListObjects alone took a cancelled listing for a finished
// one: Walk missed namespaces, ScanUsage saved a partial count as the
// bucket's usage, with ListedAt.
func (s *Store) list(ctx context.Context, what string, opts minio.ListObjectsOptions, fn func(minio.ObjectInfo) error) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the listing's goroutine when fn stops early
	for obj := range s.core.Client.ListObjects(lctx, s.cfg.Bucket, opts) {
		if obj.Err != nil {
			return s.fault(what, opts.Prefix, obj.Err)
		}
		if s.onListed != nil {
			s.onListed(obj.Key)
		}
		if err := fn(obj); err != nil {
			if errors.Is(err, errStopListing) {
				return nil
			}
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return s.fault(what, opts.Prefix, err)
	}
	return nil
}
