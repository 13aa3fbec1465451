package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cachesvc/cachesvc/store/tiered"
)

// drainer is the part of the API server that drainFirst needs.
type drainer interface {
	// Drain makes /readyz fail while everything else is still served.
	Drain()
}

// drainFirst runs the --shutdown-delay that follows SIGTERM: the server goes
// on serving, with /readyz failing, for delay, so that the load balancer in
// front (a Kubernetes Service, an HAProxy health check) takes the replica
// out before its listener closes; requests routed to it meanwhile are
// answered, not refused. A second SIGTERM or SIGINT ends the delay early, so
// an operator (or a supervisor's escalation) is never stuck behind it.
func drainFirst(srv drainer, delay time.Duration, logger *slog.Logger) {
	if delay <= 0 {
		return
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	srv.Drain()
	logger.Info("draining: /readyz answers 503 while requests are still served", "delay", delay)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case s := <-sig:
		logger.Info("drain delay cut short", "signal", s.String())
	}
}

// graceContext returns the context of the --shutdown-grace that follows
// SIGTERM (and the delay): it ends after grace, or at once on another
// SIGTERM or SIGINT, which aborts the requests still in flight (an aborted
// upload stores nothing) and leaves the write-behind queue on disk for the
// next start. An operator pressing Ctrl-C twice, or a supervisor
// escalating, is never stuck behind a 30 s grace; before, a second signal
// was ignored until the grace ran out.
func graceContext(grace time.Duration, logger *slog.Logger) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		defer signal.Stop(sig)
		select {
		case s := <-sig:
			logger.Warn("shutdown grace cut short by a second signal: aborting the requests still in flight", "signal", s.String())
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// flusher is the part of the tiered store that flushUploads needs.
type flusher interface {
	// Flush waits until the write-behind queue is empty or ctx ends.
	Flush(ctx context.Context) error
	// Stats reports, among the rest, what is queued.
	Stats() tiered.Stats
}

// flushUploads gives the write-behind queue what is left of the shutdown
// grace (ctx) to reach the bucket once no request can add to it: a replica
// stopped for good, or whose --data does not survive it (a Kubernetes
// emptyDir), would otherwise take its queued entries with it. What is still
// queued when ctx ends stays on disk for the next start (the tiered store's
// Close says how much).
func flushUploads(ctx context.Context, f flusher, logger *slog.Logger) {
	st := f.Stats()
	if st.QueueEntries == 0 {
		return
	}
	logger.Info("uploading the write-behind queue before exit (within --shutdown-grace)",
		"entries", st.QueueEntries, "bytes", st.QueueBytes)
	if err := f.Flush(ctx); err == nil {
		logger.Info("upload queue flushed: every acknowledged entry is in the shared tier")
	}
}
