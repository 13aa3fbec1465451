package tiered

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/cachesvc/cachesvc/store"
)

// uploader uploads queued items until the store closes.
func (q *queue) uploader() {
	defer q.s.wg.Done()
	ctx := q.s.ctx
	backoff := time.Duration(0)
	for {
		it := q.next()
		if it == nil {
			select {
			case <-ctx.Done():
				return
			case <-q.wake:
				// Pass the wake-up on: other uploaders may be idle too.
				select {
				case q.wake <- struct{}{}:
				default:
				}
				continue
			case <-time.After(time.Second):
				continue
			}
		}
		err := q.upload(ctx, it)
		if ctx.Err() != nil {
			q.release(it, false)
			return
		}
		if err == nil || permanent(err) {
			q.release(it, true)
			backoff = 0
			if err == nil {
				q.spell.succeeded(q.s.log)
			}
			continue
		}
		q.release(it, false)
		q.s.n.uploadRetries.Add(1)
		backoff = min(max(2*backoff, minBackoff), maxBackoff)
		wait, hurry := q.backoff(backoff)
		q.spell.failed(q.s.log, it, wait, err)
		select {
		case <-ctx.Done():
			return
		case <-hurry:
		case <-time.After(wait):
		}
	}
}

// failSpell says once that uploads fail, not at every retry: each
// uploader retries every 30 s at most for as long as the shared tier is
// down or the queue's directory is gone (until exit, then), and a WARN line
// per retry filled the log with the same line. A spell begins at a
// failure after a success (or at the start) and ends at the next success;
// its first failure is logged at WARN, and again when the queue's
// directory is found gone (the cause that loses data), every retry at
// DEBUG, and its end at INFO with the retries it took. The queue's
// uploaders share it. Safe for concurrent use.
type failSpell struct {
	mu      sync.Mutex
	failing bool
	gone    bool // the spell has logged the queue's directory gone
	retries int64
	since   time.Time
}

// failed counts a failed upload of it that will be retried after wait,
// and logs it (see failSpell).
func (f *failSpell) failed(log *slog.Logger, it *qitem, wait time.Duration, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retries++
	gone := errors.Is(err, errQueueGone)
	attrs := []any{"namespace", it.rec.Namespace, "key", it.rec.Key, "backoff", wait, "err", err}
	// The directory gone is news within a spell; it does not come
	// back (a restart makes the queue anew), so a shared-tier failure
	// after it is not: uploaders that had opened a body before the
	// removal go on failing at the shared tier for a while.
	if f.failing && (f.gone || !gone) {
		log.Debug("upload to the shared tier failed; retrying", attrs...)
		return
	}
	if !f.failing {
		f.failing, f.since = true, time.Now()
	}
	f.gone = gone
	log.Warn("uploads to the shared tier fail; retrying with a backoff of up to "+maxBackoff.String()+
		" (further failures are logged at debug, and the next success at info)",
		append(attrs, "retries", f.retries)...)
}

// succeeded ends a spell of failures, if any, saying so with the retries
// it took.
func (f *failSpell) succeeded(log *slog.Logger) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.failing {
		return
	}
	log.Info("uploads to the shared tier succeed again", "retries", f.retries, "failing_for", time.Since(f.since).Round(time.Millisecond))
	f.failing, f.gone, f.retries = false, false, 0
}

// pending returns the retries of the spell of failures going on, or 0.
func (f *failSpell) pending() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.retries
}

// errQueueGone is an upload's error while the queue's directory is gone:
// not permanent, so the entry stays queued, counted and named as not
// uploaded (Stats, Flush, CloseShared's report).
var errQueueGone = errors.New("the upload queue's directory is gone")

// permanent reports whether an upload error will not go away by retrying.
func permanent(err error) bool {
	if errors.Is(err, errQueueGone) {
		return false
	}
	for _, e := range []error{store.ErrConflict, store.ErrDigestMismatch, store.ErrSizeMismatch, store.ErrTooLarge, store.ErrInvalid, os.ErrNotExist} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// upload sends one item to the shared tier. On a permanent refusal it
// logs, counts and, for a conflict, deletes the hot copy.
func (q *queue) upload(ctx context.Context, it *qitem) error {
	f, err := os.Open(q.path(it.rec.Seq, ".body"))
	if err != nil {
		// Its directory went (--data deleted): dropping the entry as a
		// body gone alone would make Flush report it uploaded and the
		// exit name none of what was never uploaded.
		if derr := q.s.queueDirErr(); derr != nil {
			return fmt.Errorf("read queued entry %s/%s: %w: %w", it.m.Namespace, it.rec.Key, errQueueGone, derr)
		}
		if permanent(err) {
			q.s.n.uploadsDropped.Add(1)
			q.s.emit(Event{Kind: EventUploadDropped, Namespace: it.m.Namespace, Bytes: it.m.Size, Err: err})
			q.s.log.Error("queued entry dropped without an upload: its file in the upload queue is gone", "namespace", it.m.Namespace, "key", it.rec.Key, "err", err)
		}
		return err
	}
	defer f.Close()
	t0 := time.Now()
	_, err = q.s.shared.Put(ctx, it.m.Namespace, it.m.Key, f, it.opts())
	q.s.sharedResult(EventSharedPut, time.Since(t0), it.m.Size, err)
	switch {
	case err == nil:
		q.s.n.uploaded.Add(1)
	case permanent(err):
		q.s.n.uploadsDropped.Add(1)
		q.s.emit(Event{Kind: EventUploadDropped, Namespace: it.m.Namespace, Bytes: it.m.Size, Err: err})
		q.s.log.Error("queued entry dropped without an upload", "namespace", it.m.Namespace, "key", it.rec.Key, "err", err)
		if errors.Is(err, store.ErrConflict) {
			if hm, herr := q.s.hot.Stat(ctx, it.m.Namespace, it.m.Key); herr == nil && hm.SHA256 == it.m.SHA256 {
				_ = q.s.hot.Delete(ctx, it.m.Namespace, it.m.Key)
			}
		}
	}
	return err
}

// release ends an upload: done removes the item (uploaded or dropped).
func (q *queue) release(it *qitem, done bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	it.uploading = false
	id := it.m.Namespace + "/" + it.rec.Key
	if it.removed || done {
		q.drop(id, it)
	}
}
