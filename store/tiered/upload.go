package tiered

import (
	"context"
	"errors"
	"fmt"
	"os"
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
			continue
		}
		q.release(it, false)
		q.s.n.uploadRetries.Add(1)
		backoff = min(max(2*backoff, minBackoff), maxBackoff)
		wait, hurry := q.backoff(backoff)
		q.s.log.Warn("upload to the shared tier failed; retrying", "namespace", it.rec.Namespace, "key", it.rec.Key,
			"backoff", wait, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-hurry:
		case <-time.After(wait):
		}
	}
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
