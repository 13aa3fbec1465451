package s3

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
)

// walkPage is how many records Walk fetches at once, walkFetchers how many
// requests it has in flight: records are separate objects, so a listing of
// names is followed by one GET per record.
const (
	walkPage     = 128
	walkFetchers = 8
)

// Walk calls fn with the metadata of every entry in ns ("" for every
// namespace), in namespace then key order, until fn returns false or ctx
// ends. It lists entries/ and reads each record; a record deleted between
// the listing and its read is skipped.
func (s *Store) Walk(ctx context.Context, ns string, fn func(store.Meta) bool) error {
	return s.walk(ctx, ns, "", nil, fn)
}

// WalkAfter is Walk starting after the entry (afterNS, afterKey), which need
// not exist: the entries Walk would visit after it, in the same order. The
// listing starts there (S3's start-after), so a paged listing costs
// requests for its page, not for every entry before it.
func (s *Store) WalkAfter(ctx context.Context, ns, afterNS string, afterKey store.Key, fn func(store.Meta) bool) error {
	if err := store.CheckNamespace("walk entries", afterNS); err != nil {
		return err
	}
	return s.walk(ctx, ns, afterNS, &afterKey, fn)
}

// walk is Walk from after (afterNS, afterKey); a nil afterKey is the start.
func (s *Store) walk(ctx context.Context, ns, afterNS string, afterKey *store.Key, fn func(store.Meta) bool) error {
	if ns != "" {
		if err := store.CheckNamespace("walk entries", ns); err != nil {
			return err
		}
	}
	if err := s.enter(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("walk entries: %w", err)
	}
	namespaces := []string{ns}
	if ns == "" {
		var err error
		if namespaces, err = s.namespaces(ctx); err != nil {
			return err
		}
	}
	for _, ns := range namespaces {
		startAfter := ""
		if afterKey != nil {
			if ns < afterNS {
				continue // the cursor sorts after this namespace
			}
			if ns == afterNS {
				startAfter = afterKey.String()
			}
		}
		more, err := s.walkNamespace(ctx, ns, startAfter, fn)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// namespaces lists the namespaces that have records, in string order (S3
// lists "alpha.2/" before "alpha/", since '.' sorts before '/').
func (s *Store) namespaces(ctx context.Context) ([]string, error) {
	prefix := s.cfg.Prefix + "entries/"
	var out []string
	err := s.list(ctx, "list namespaces", minio.ListObjectsOptions{Prefix: prefix}, func(obj minio.ObjectInfo) error {
		ns := strings.TrimSuffix(strings.TrimPrefix(obj.Key, prefix), "/")
		if cachekey.ValidateNamespace(ns) == nil {
			out = append(out, ns)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// walkNamespace walks one namespace's records after the key startAfter
// ("" for all); more is false once fn said stop.
func (s *Store) walkNamespace(ctx context.Context, ns, startAfter string, fn func(store.Meta) bool) (more bool, err error) {
	prefix := s.cfg.Prefix + "entries/" + ns + "/"
	page := make([]store.Key, 0, walkPage)
	flush := func() (bool, error) {
		metas, err := s.fetchRecords(ctx, ns, page)
		page = page[:0]
		if err != nil {
			return false, err
		}
		for _, m := range metas {
			if m != nil && !fn(*m) {
				return false, nil
			}
		}
		return true, nil
	}
	opts := minio.ListObjectsOptions{Prefix: prefix, Recursive: true}
	if startAfter != "" {
		opts.StartAfter = prefix + startAfter
	}
	more = true
	err = s.list(ctx, "list entries", opts, func(obj minio.ObjectInfo) error {
		name := strings.TrimPrefix(obj.Key, prefix)
		if startAfter != "" && name <= startAfter {
			return nil // a server that ignores start-after lists from the start
		}
		key, err := cachekey.ParseKey(name)
		if err != nil {
			return nil // not a record of ours
		}
		if page = append(page, key); len(page) == walkPage {
			if more, err = flush(); err != nil {
				return err
			}
			if !more {
				return errStopListing
			}
		}
		return nil
	})
	if err != nil || !more {
		return false, err
	}
	return flush()
}

// fetchRecords reads the records of keys concurrently; a nil result is a
// record that no longer exists.
func (s *Store) fetchRecords(ctx context.Context, ns string, keys []store.Key) ([]*store.Meta, error) {
	out := make([]*store.Meta, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(walkFetchers)
	for i, key := range keys {
		g.Go(func() error {
			m, err := s.readRecord(gctx, ns, key)
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrCorrupt) {
				return nil // gone, or did not decode (quarantined): not an entry
			}
			if err != nil {
				return err
			}
			out[i] = &m
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("walk entries: %w", err)
	}
	return out, nil
}

// usageCounts is Usage's bookkeeping: the counts of the last listing of the
// bucket plus this process's own changes since the listing began, and
// whether a listing has finished yet (until then the counts are only this
// process's changes: no count of the bucket).
type usageCounts struct {
	mu                    sync.Mutex
	entries, blobs, bytes int64
	listedAt              time.Time // end of the last listing; zero: none yet
	listing               time.Time // start of the listing running; zero: none
	listErr               error     // the last listing's failure, cleared by a success
	integrity             atomic.Int64
}

// uncounted says why the counts are not a count of the bucket yet ("" once a
// listing has finished), for StoreUsage.Uncounted. With u.mu held.
func (u *usageCounts) uncounted(now time.Time) string {
	switch {
	case !u.listedAt.IsZero():
		return ""
	case u.listErr != nil:
		// A retry may be running: its failure is still the news.
		return "first listing of the bucket failing: " + u.listErr.Error()
	case !u.listing.IsZero():
		// A listing of a hung server runs until the HTTP client gives
		// up: say how long it has been waiting.
		return fmt.Sprintf("first listing of the bucket pending, running for %s", now.Sub(u.listing).Round(time.Second))
	}
	return "first listing of the bucket pending"
}

func (u *usageCounts) add(entries, blobs, bytes int64) {
	u.mu.Lock()
	u.entries += entries
	u.blobs += blobs
	u.bytes += bytes
	u.mu.Unlock()
}

// Usage returns approximate counts: those of the last listing of the bucket
// (ScanUsage, at Open and every Config.UsageInterval) adjusted by this
// process's own Puts and Deletes since. Other replicas' writes show at the
// next listing; a write during a listing may be counted twice until the
// next one. Bytes are what the bucket holds for the entries: the objects of
// blobs/, including blobs that no record names any more (a later gc frees
// them), plus the records of entries/. An entry of at most InlineMax bytes
// has no blob: its bytes are in its record, base64, so it counts about 4/3
// of its size plus its metadata (before, it counted nothing, and a bucket
// of small entries showed 0 bytes). The listing gives each object's size,
// so no record is read. A record quarantined for damage is uncounted at
// the next listing. Nothing is evicted and MaxBytes is 0.
//
// Until a listing has finished the counts are this process's changes
// alone, no count of the bucket: Uncounted says so and why (the listing
// pending, or failing with its error), and ListedAt is zero. ListedAt is
// when the last listing finished; ListInterval is Config.UsageInterval (0
// when listing is off).
func (s *Store) Usage() store.Usage {
	u := &s.usage
	u.mu.Lock()
	defer u.mu.Unlock()
	return store.Usage{Entries: u.entries, Blobs: u.blobs, Bytes: u.bytes, IntegrityFailures: u.integrity.Load(),
		Uncounted: u.uncounted(time.Now()), ListedAt: u.listedAt, ListInterval: max(0, s.cfg.UsageInterval.Seconds())}
}

// ScanUsage lists the bucket's records and blobs and resets Usage's counts
// to what it found (plus this process's changes during the listing). It
// costs one list request per 1,000 objects. Until one has succeeded, Usage
// says the counts are not counted yet, with this one's error if it fails.
func (s *Store) ScanUsage(ctx context.Context) (err error) {
	s.usage.mu.Lock()
	s.usage.listing = time.Now()
	e0, b0, n0 := s.usage.entries, s.usage.blobs, s.usage.bytes
	s.usage.mu.Unlock()
	defer func() {
		if err != nil {
			s.usage.mu.Lock()
			s.usage.listing, s.usage.listErr = time.Time{}, err
			s.usage.mu.Unlock()
		}
	}()
	var entries, blobs, bytes int64
	err = s.list(ctx, "list entries", minio.ListObjectsOptions{Prefix: s.cfg.Prefix + "entries/", Recursive: true}, func(obj minio.ObjectInfo) error {
		entries++
		bytes += obj.Size
		return nil
	})
	if err != nil {
		return err
	}
	err = s.list(ctx, "list blobs", minio.ListObjectsOptions{Prefix: s.cfg.Prefix + "blobs/", Recursive: true}, func(obj minio.ObjectInfo) error {
		blobs++
		bytes += obj.Size
		return nil
	})
	if err != nil {
		return err
	}
	s.usage.mu.Lock()
	s.usage.entries += entries - e0
	s.usage.blobs += blobs - b0
	s.usage.bytes += bytes - n0
	s.usage.listedAt, s.usage.listing, s.usage.listErr = time.Now().UTC(), time.Time{}, nil
	s.usage.mu.Unlock()
	return nil
}

// usageLoop runs ScanUsage at Open and every Config.UsageInterval, and
// every Config.UsageRetry after a failure while no listing has finished.
func (s *Store) usageLoop() {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-s.stop; cancel() }()
	for {
		wait := s.cfg.UsageInterval
		if err := s.ScanUsage(ctx); err != nil && ctx.Err() == nil {
			s.usage.mu.Lock()
			first := s.usage.listedAt.IsZero()
			s.usage.mu.Unlock()
			if first {
				wait = s.cfg.UsageRetry
			}
			s.log.Warn("s3 usage scan failed", "bucket", s.cfg.Bucket, "counted", !first, "retry_in", wait, "err", err)
		}
		select {
		case <-s.stop:
			return
		case <-time.After(wait):
		}
	}
}
