package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// interrupt is the cause of the command's context when SIGINT or SIGTERM
// asked it to stop. It reads "interrupted by SIGINT" in the errors that
// name their context's cause (an HTTP request's, for one), and matches
// context.Canceled as the standard library's signal cause does.
type interrupt struct{ sig syscall.Signal }

// Error names the signal.
func (i interrupt) Error() string { return "interrupted by " + signalName(i.sig) }

// Is reports whether target is context.Canceled.
func (i interrupt) Is(target error) bool { return target == context.Canceled }

// exitCode is the shell's status for a process that a signal stopped:
// 128 + its number (130 for SIGINT, 143 for SIGTERM), so that a script can
// tell an interrupted command from one that failed (1).
func (i interrupt) exitCode() int { return 128 + int(i.sig) }

// signalName returns the conventional name of the signals main handles.
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// notifyInterrupt returns a context that SIGINT or SIGTERM cancels with an
// interrupt cause (signal.NotifyContext's cause names the signal only in
// words), and a stop function that restores the default handling.
func notifyInterrupt(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			sig, _ := s.(syscall.Signal)
			cancel(interrupt{sig: sig})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(context.Canceled)
	}
}

// interruptOf returns the signal that cancelled ctx, if one did.
func interruptOf(ctx context.Context) (interrupt, bool) {
	var in interrupt
	ok := errors.As(context.Cause(ctx), &in)
	return in, ok
}

// stoppedBy reports whether a command that returned err after SIGINT or
// SIGTERM arrived exits 128 + the signal (interrupt.exitCode). A command run once (stats, warm, export...)
// does, whatever it returned: it was interrupted, even if it got to its
// end. A daemon does only when the signal cut its start short (its error
// is the cancellation): a clean stop (nil) is its success, exit 0, and an
// error of its own while stopping (its store failed to close) is a
// failure, exit 1, as it would be without the signal.
func stoppedBy(err error, daemon bool) bool {
	if !daemon {
		return true
	}
	return err != nil && errors.Is(err, context.Canceled)
}

// cmdState is what a running command tells dispatch about itself.
type cmdState struct {
	// daemon is set by a command that runs until it is asked to stop
	// (serve, agent watching): a clean stop on SIGINT or SIGTERM is its
	// success, exit 0, as systemd expects of a service it stops.
	daemon bool
}

// markDaemon records that the command now runs until it is asked to stop
// (see cmdState.daemon). It does nothing for a command run without state
// (tests calling a command's function directly).
func (s stdio) markDaemon() {
	if s.state != nil {
		s.state.daemon = true
	}
}
