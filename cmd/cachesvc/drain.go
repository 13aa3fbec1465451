package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
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
