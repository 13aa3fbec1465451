package main

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCloseAll checks closer.closeAll: steps close last added first, each
// after the one before; a step that hangs is named with what it loses, as
// are those it keeps from running, and closeAll returns by its deadline;
// the data directory's state leads the error when it is to blame; a step
// that needs the directory is not run while it is gone; an apart step runs
// beside the others.
func TestCloseAll(t *testing.T) {
	hang := func(ctx context.Context) error { select {} }
	ok := func(context.Context) error { return nil }
	fails := func(context.Context) error { return errors.New("disk on fire") }
	var notCalled func(context.Context) error // replaced below by one that fails the test
	gone := func() error {
		return errors.New("the data directory /d is gone or not writable: stat /d: no such file or directory")
	}
	statsRO := func() error {
		return errors.New("the statistics directory /d/stats is gone or not writable: access /d/stats: read-only file system")
	}
	tests := []struct {
		name  string
		steps []closeStep // added in this order: closed from the last
		// deadline is closeAll's, from now; 100ms if zero.
		deadline time.Duration
		dirErr   func() error
		want     []string // in the error, in this order
		wantNil  bool
	}{
		{name: "all close", steps: []closeStep{{what: "store", close: ok}, {what: "stats", close: ok}}, dirErr: func() error { return nil }, wantNil: true},
		{name: "all close, into a directory that is gone", steps: []closeStep{{what: "store", close: ok}}, dirErr: gone,
			want: []string{"closed, but the data directory /d is gone or not writable: stat /d: no such file or directory"}},
		{name: "an error is named", steps: []closeStep{{what: "store /d", close: fails}, {what: "stats", close: ok}},
			want: []string{"close store /d: disk on fire"}},
		{name: "a hang names it and what it kept from closing", dirErr: func() error { return nil },
			steps: []closeStep{{what: "store /d", lost: "access times", close: ok}, {what: "stats /d/stats", lost: "counters", close: hang}},
			want:  []string{"not closed by the end of --shutdown-grace + 5s: stats /d/stats (counters); store /d (access times)"}},
		{name: "the data directory leads", dirErr: gone,
			steps: []closeStep{{what: "store /d", lost: "access times", close: fails}, {what: "stats /d/stats", lost: "counters", close: hang}},
			want:  []string{"the data directory /d is gone or not writable: stat /d: no such file or directory. Not closed by the end of --shutdown-grace + 5s: stats /d/stats (counters); store /d (access times)"}},
		// Badger's Close retries its flush into a deleted directory for
		// good: closeAll does not run it (notCalled) and returns before
		// its deadline; the step without the directory still closes, and
		// its error is kept.
		{name: "a step that needs the directory is not run while it is gone", dirErr: gone, deadline: 10 * time.Second,
			steps: []closeStep{
				{what: "store /d", lost: "access times", close: notCalled, needsDir: true},
				{what: "stats /d/stats", lost: "counters", close: notCalled, needsDir: true},
				{what: "memo", lost: "results", close: fails}},
			want: []string{"the data directory /d is gone or not writable: stat /d: no such file or directory. Not closed (closing would wait for good to write into the directory): stats /d/stats (counters); store /d (access times)",
				"close memo: disk on fire"}},
		// <data>/stats made read-only alone: the data directory's look
		// passes, the statistics' own fails.
		{name: "a step whose own directory is not writable is not run", dirErr: func() error { return nil }, deadline: 10 * time.Second,
			steps: []closeStep{
				{what: "store /d", lost: "access times", close: ok, needsDir: true},
				{what: "stats /d/stats", lost: "counters", close: notCalled, needsDir: true, dirErr: statsRO}},
			want: []string{"the statistics directory /d/stats is gone or not writable: access /d/stats: read-only file system. Not closed (closing would wait for good to write into the directory): stats /d/stats (counters)"}},
		{name: "a step that needs the directory closes while it is there", dirErr: func() error { return nil },
			steps: []closeStep{{what: "store /d", close: ok, needsDir: true}}, wantNil: true},
		{name: "an apart step does not wait its turn", dirErr: gone,
			steps: []closeStep{{what: "heartbeat", lost: "the last one", close: ok, apart: true}, {what: "stats", lost: "counters", close: hang}},
			want:  []string{"Not closed by the end of --shutdown-grace + 5s: stats (counters)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := closer{dirErr: tc.dirErr}
			for _, s := range tc.steps {
				if s.close == nil { // notCalled
					s.close = func(context.Context) error {
						t.Errorf("closeAll closed %s, which needs the data directory, while it is gone", s.what)
						select {} // as Badger's Close does then
					}
				}
				c.add(s)
			}
			deadline := cmp.Or(tc.deadline, 100*time.Millisecond)
			start := time.Now()
			err := c.closeAll(start.Add(deadline))
			if took := time.Since(start); took > deadline+5*time.Second {
				t.Errorf("closeAll took %s past a deadline of %s", took, deadline)
			}
			if tc.wantNil {
				if err != nil {
					t.Errorf("closeAll: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("closeAll: nil, want %q", tc.want)
			}
			msg := err.Error()
			for _, w := range tc.want {
				i := strings.Index(msg, w)
				if i < 0 {
					t.Fatalf("closeAll: %q\nlacks %q", err, w)
				}
				msg = msg[i+len(w):]
			}
		})
	}
}

// TestCloseAllOrder checks that the steps close last added first (the
// statistics sample the store while they close, so the store goes after
// them), one at a time.
func TestCloseAllOrder(t *testing.T) {
	var mu sync.Mutex
	var got []string
	c := closer{}
	for _, name := range []string{"store", "stats", "memo"} {
		c.add(closeStep{what: name, close: func(context.Context) error {
			mu.Lock()
			got = append(got, name)
			mu.Unlock()
			time.Sleep(time.Millisecond) // a step that overlapped the next would show here
			return nil
		}})
	}
	if err := c.closeAll(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "memo stats store" {
		t.Errorf("closed %v, want memo stats store", got)
	}
}

// TestCloseAllDirGoneWhileClosing removes the data directory (or makes a
// step's own directory in it read-only) while a step that needs it is
// already closing (Badger's Close then retries its flush into the directory
// for good): closeAll must stop waiting for that step as soon as it sees
// the directory gone, name it with what is lost, and still close the steps
// after it that do not need the directory. Before, it waited for the step
// until its deadline (--shutdown-grace + 5s); for a step's own directory
// (<data>/stats read-only alone) it still did.
func TestCloseAllDirGoneWhileClosing(t *testing.T) {
	tests := []struct {
		name string
		own  bool // the step's own directory breaks, not the data directory
		want string
	}{
		{"data directory", false, "the data directory /d is gone or not writable: stat /d: no such file or directory. Not closed (the directory went away or became read-only while it closed, and closing would wait for good to write into it): store /d (access times)"},
		{"own directory", true, "the statistics directory /d/stats is gone or not writable: access /d/stats: read-only file system. Not closed (the directory went away or became read-only while it closed, and closing would wait for good to write into it): store /d (access times)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var broken atomic.Bool
			look := func(msg string) func() error {
				return func() error {
					if broken.Load() {
						return errors.New(msg)
					}
					return nil
				}
			}
			dataErr, ownErr := look("the data directory /d is gone or not writable: stat /d: no such file or directory"), look("the statistics directory /d/stats is gone or not writable: access /d/stats: read-only file system")
			if tc.own {
				dataErr = func() error { return nil }
			} else {
				ownErr = nil
			}
			c := closer{dirErr: dataErr}
			memoClosed := make(chan struct{})
			c.add(closeStep{what: "memo", lost: "results", close: func(context.Context) error { close(memoClosed); return nil }})
			c.add(closeStep{what: "store /d", lost: "access times", needsDir: true, dirErr: ownErr, close: func(ctx context.Context) error {
				broken.Store(true) // rm -rf or a read-only remount, while Badger flushes
				select {}          // as Badger's Close does then
			}})
			// Long enough that reaching it is waiting out the deadline,
			// not seeing the directory gone.
			const deadline = 20 * time.Second
			err := c.closeAll(time.Now().Add(deadline))
			if err == nil {
				t.Fatal("closeAll: nil, want an error naming the store")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("closeAll: %q\nlacks %q", err, tc.want)
			}
			select {
			case <-memoClosed:
			default:
				t.Error("the step after the one the directory broke under was not closed")
			}
		})
	}
}
