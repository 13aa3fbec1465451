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
// --data deleted under it) never returns, so closeAll does not run it then
// (closeStep.needsDir), and the margin bounds what else may hang.
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
	// needsDir marks a Badger database in the data directory. Its Close
	// flushes the memtable into a new table file there and, when that
	// cannot be created, retries every second for good; so while the
	// directory is gone or not writable (closer.dirErr, or dirErr below)
	// closeAll does not run it: it would save nothing, and serve would
	// wait out the whole --shutdown-grace + closeMargin for it.
	needsDir bool
	// dirErr, for a needsDir step whose database has a directory of its
	// own in the data directory (the statistics' <data>/stats), reports
	// why that one cannot be written, or nil: it can be made read-only
	// alone, and the data directory's look (closer.dirErr) passes then.
	dirErr func() error
	// wait, when positive, bounds how long the steps after it wait for
	// it: past it they close while it is left running, and closeAll names
	// it with what is lost. It is for a step that can hang for a reason
	// closeAll cannot see (a stuck fsync, a lock) ahead of one that must
	// close: the statistics ahead of the store, whose Close writes the
	// users' entries' last state and releases --data for the next start.
	wait time.Duration
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
// never reached, with what is lost, and why when the data directory (or a
// step's own directory in it, closeStep.dirErr) is gone or not writable. A
// needsDir step reached while its directory is gone or not writable is not
// run, and named with what is lost; the others still close in order; one
// whose directory goes while it closes is no longer waited for
// (closeWatched), and named alike, as is one still closing after its
// closeStep.wait, so that the steps after it close. Errors the steps return are joined
// to it. A directory gone or not writable is an error even when everything
// closed.
func (c *closer) closeAll(deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	type result struct {
		i         int
		err       error
		skipped   bool // a needsDir step, not run
		abandoned bool // a needsDir step the directory broke under
		hung      bool // a step still closing after its wait
	}
	results := make(chan result, len(c.steps))
	var ordered []int
	for i := len(c.steps) - 1; i >= 0; i-- {
		if c.steps[i].apart {
			go func() { results <- result{i: i, err: c.steps[i].close(ctx)} }()
		} else {
			ordered = append(ordered, i)
		}
	}
	go func() {
		for _, i := range ordered {
			// Looked at as each is reached: a directory deleted
			// while an earlier step closed counts too.
			if c.steps[i].needsDir && c.stepDirErr(c.steps[i]) != nil {
				results <- result{i: i, skipped: true}
				continue
			}
			if c.steps[i].wait > 0 || c.steps[i].needsDir && (c.dirErr != nil || c.steps[i].dirErr != nil) {
				abandoned, hung, err := c.closeWatched(ctx, c.steps[i])
				results <- result{i: i, err: err, abandoned: abandoned, hung: hung}
				continue
			}
			results <- result{i: i, err: c.steps[i].close(ctx)}
		}
	}()
	done := make([]bool, len(c.steps))
	var skipped, abandoned, hung []string
	var errs []error
wait:
	for range c.steps {
		select {
		case r := <-results:
			done[r.i] = true
			if r.skipped {
				skipped = append(skipped, c.steps[r.i].lostText())
			}
			if r.abandoned {
				abandoned = append(abandoned, c.steps[r.i].lostText())
			}
			if r.hung {
				hung = append(hung, fmt.Sprintf("%s after %s", c.steps[r.i].lostText(), c.steps[r.i].wait))
			}
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
			stuck = append(stuck, c.steps[i].lostText())
		}
	}
	derr := c.brokenDirs()
	var parts []string
	if len(skipped) > 0 {
		parts = append(parts, "Not closed (closing would wait for good to write into the directory): "+strings.Join(skipped, "; "))
	}
	if len(abandoned) > 0 {
		parts = append(parts, "Not closed (the directory went away or became read-only while it closed, and closing would wait for good to write into it): "+strings.Join(abandoned, "; "))
	}
	if len(hung) > 0 {
		parts = append(parts, "Not closed (its close did not return in time and was left running, so that the store behind it could close): "+strings.Join(hung, "; "))
	}
	if len(stuck) > 0 {
		parts = append(parts, fmt.Sprintf("Not closed by the end of --shutdown-grace + %s: %s", closeMargin, strings.Join(stuck, "; ")))
	}
	var err error
	switch {
	case derr != nil && len(parts) == 0:
		// Everything closed, into a directory that is gone (or
		// cannot take the next start's writes): not a clean stop.
		err = fmt.Errorf("closed, but %w", derr)
	case derr != nil:
		// The cause first: it is what the operator must act on.
		err = fmt.Errorf("%w. %s", derr, strings.Join(parts, ". "))
	case len(parts) > 0:
		msg := strings.Join(parts, ". ")
		err = errors.New(strings.ToLower(msg[:1]) + msg[1:])
	default:
		return errors.Join(errs...)
	}
	return errors.Join(append([]error{err}, errs...)...)
}

// dirPoll is how often closeAll looks at the data directory while a step
// that needs it closes: a stat and an access(2) each time.
const dirPoll = 100 * time.Millisecond

// closeWatched runs a step's close and waits for it while, for a needsDir
// step, the data directory stays writable, and for at most s.wait when it
// is set. A directory removed (or made read-only) while the step closes
// makes Badger's Close retry its flush into it for good, so once
// closeWatched sees it gone it stops waiting: abandoned is true. A close
// still running after s.wait makes hung true. Either way the close is left
// running (the process is about to exit), and the steps after it close
// meanwhile instead of waiting out the deadline.
func (c *closer) closeWatched(ctx context.Context, s closeStep) (abandoned, hung bool, err error) {
	done := make(chan error, 1)
	go func() { done <- s.close(ctx) }()
	var tick, waited <-chan time.Time
	if s.needsDir && (c.dirErr != nil || s.dirErr != nil) {
		t := time.NewTicker(dirPoll)
		defer t.Stop()
		tick = t.C
	}
	if s.wait > 0 {
		t := time.NewTimer(s.wait)
		defer t.Stop()
		waited = t.C
	}
	for {
		select {
		case err := <-done:
			return false, false, err
		case <-tick:
			if c.stepDirErr(s) != nil {
				return true, false, nil
			}
		case <-waited:
			return false, true, nil
		case <-ctx.Done():
			// closeAll names it as not closed by the deadline.
			return false, false, <-done
		}
	}
}

// stepDirErr reports why a needsDir step's directory cannot be written:
// the data directory's error (closer.dirErr) first, then the step's own
// directory's, or nil.
func (c *closer) stepDirErr(s closeStep) error {
	if c.dirErr != nil {
		if err := c.dirErr(); err != nil {
			return err
		}
	}
	if s.dirErr != nil {
		return s.dirErr()
	}
	return nil
}

// brokenDirs reports why the data directory cannot be written or, when it
// can, why the steps' own directories cannot (joined, in the order the
// steps were added), or nil: the cause the exit leads with. A directory of
// a step's own is inside the data directory, so when that one is gone its
// error says all.
func (c *closer) brokenDirs() error {
	if c.dirErr != nil {
		if err := c.dirErr(); err != nil {
			return err
		}
	}
	var errs []error
	for _, s := range c.steps {
		if s.dirErr == nil {
			continue
		}
		if err := s.dirErr(); err != nil {
			errs = append(errs, err)
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return errors.New(strings.Join(msgs, "; ")) // one line, as the exit prints it
}

// lostText names the step and what is lost when it does not close.
func (s closeStep) lostText() string { return fmt.Sprintf("%s (%s)", s.what, s.lost) }
