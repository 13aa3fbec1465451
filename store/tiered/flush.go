package tiered

import (
	"context"
	"time"
)

// flushBackoff bounds an uploader's wait between retries while Flush runs:
// a process about to stop has seconds left, not minutes.
const flushBackoff = time.Second

// flushPoll is how often Flush looks at the queue.
const flushPoll = 20 * time.Millisecond

// Flush waits until the write-behind queue is empty (every entry uploaded,
// or dropped as a permanent refusal) or ctx ends, and returns ctx's error
// then. Uploaders waiting out a long backoff try again at once, and retry
// at least every second while Flush runs. Call it when no more Puts come
// (serve, after its HTTP drain) and before Close, so that a stopping
// replica leaves nothing on a disk that may not come back (a Kubernetes
// emptyDir); what is left stays queued for the next process. Without a
// queue (ModeThrough) it returns nil at once.
func (s *Store) Flush(ctx context.Context) error {
	if s.q == nil {
		return nil
	}
	s.q.hurried.Do(func() { close(s.q.hurry) })
	t := time.NewTicker(flushPoll)
	defer t.Stop()
	for {
		if n, _, _ := s.q.depth(); n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// backoff returns how long an uploader waits before retrying, given its
// backoff, and a channel that ends the wait early when Flush begins (nil,
// which never does, once it has: the wait is then at most flushBackoff).
func (q *queue) backoff(d time.Duration) (time.Duration, <-chan struct{}) {
	select {
	case <-q.hurry:
		return min(d, flushBackoff), nil
	default:
		return d, q.hurry
	}
}
