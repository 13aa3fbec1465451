package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// closeMargin is how long serve waits, past the end of --shutdown-grace (or
// of its start when a second signal cut it short), for what it closes at
// exit: the statistics, the store, the plugins' signature memo and the
// last fleet heartbeat. Closing a healthy store takes well under a second
// (Badger flushes at most one memtable, 64 MiB); one that cannot write (its
// --data deleted under it) never returned, and only SIGKILL ended serve.
const closeMargin = 5 * time.Second

// closeStep is one thing serve closes at exit.
type closeStep struct {
	// what names it, with its path: "statistics /data/stats".
	what string
	// lost says what is lost when it does not close in time.
	lost string
	// close closes it; ctx ends at the close deadline, for the steps that
	// can stop waiting (on the shared tier) by themselves.
	close func(ctx context.Context) error
	// apart runs it beside the others rather than in their order: it
	// waits on the network, not on the data directory.
	apart bool
}

// closer closes what serve opened, last opened first, within a deadline.
type closer struct {
	steps []closeStep
	// dirErr reports why the data directory cannot be written, or nil
	// (store.Badger.DirErr); nil until the store is open.
	dirErr func() error
}

// add registers a step; closeAll runs the steps in the reverse order.
func (c *closer) add(s closeStep) { c.steps = append(c.steps, s) }

// closeAll closes every step, last added first and each after the one
// before has returned (the statistics sample the store as they close, so the
// store closes after them), and the apart steps beside them. It returns by
// deadline whatever happens: a step that has not returned by then is left
// running (the process is about to exit) and named in the error with those
// never reached, with what is lost, and why when the data directory is gone
// or not writable. Errors the steps return are joined to it. A data
// directory gone or not writable is an error even when everything closed.
func (c *closer) closeAll(deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(c.steps))
	var ordered []int
	for i := len(c.steps) - 1; i >= 0; i-- {
		if c.steps[i].apart {
			go func() { results <- result{i, c.steps[i].close(ctx)} }()
		} else {
			ordered = append(ordered, i)
		}
	}
	go func() {
		for _, i := range ordered {
			results <- result{i, c.steps[i].close(ctx)}
		}
	}()
	done := make([]bool, len(c.steps))
	var errs []error
wait:
	for range c.steps {
		select {
		case r := <-results:
			done[r.i] = true
			if r.err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", c.steps[r.i].what, r.err))
			}
		case <-ctx.Done():
			break wait
		}
	}
	var stuck []string
	for i := len(c.steps) - 1; i >= 0; i-- {
		if !done[i] {
			stuck = append(stuck, fmt.Sprintf("%s (%s)", c.steps[i].what, c.steps[i].lost))
		}
	}
	var derr error
	if c.dirErr != nil {
		derr = c.dirErr()
	}
	if len(stuck) == 0 {
		if derr != nil {
			// Everything closed, into a directory that is gone (or
			// cannot take the next start's writes): not a clean stop.
			errs = append([]error{fmt.Errorf("closed, but %w", derr)}, errs...)
		}
		return errors.Join(errs...)
	}
	list := strings.Join(stuck, "; ")
	if derr != nil {
		// The cause first: it is what the operator must act on.
		derr = fmt.Errorf("%w. Not closed by the end of --shutdown-grace + %s: %s", derr, closeMargin, list)
		return errors.Join(append([]error{derr}, errs...)...)
	}
	err := fmt.Errorf("not closed by the end of --shutdown-grace + %s: %s", closeMargin, list)
	return errors.Join(append([]error{err}, errs...)...)
}
