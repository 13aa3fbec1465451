package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cachesvc/cachesvc/stats"
	"github.com/cachesvc/cachesvc/stats/report"
	"github.com/cachesvc/cachesvc/store"
)

// runStats prints a server's statistics as tables: `cachesvc stats [--url
// URL] [--namespace NS] [--json]`.
func runStats(ctx context.Context, args []string, sio stdio) error {
	var cf clientFlags
	var timeout time.Duration
	fs := newFlagSet("stats", "Print a server's hit rate, compile time saved, runs and misses as tables.", sio)
	cf.register(fs, "", "only this `namespace` (default: all namespaces)") // clientflags.go
	durationVar(fs, &timeout, "timeout", 30*time.Second, 0, noLimitOrMore, "give up after this long (0 = no limit; negative is refused)")
	scope := fs.String("scope", "replica", "`scope` of the numbers: replica (the server's own) or fleet (every replica's health and the fleet's totals, read by the server from the shared tier)")
	asJSON := fs.Bool("json", false, "print the server's answer as JSON (the fields of GET /v1/stats) instead of tables")
	if err := parseOperandless(fs, args, sio); err != nil {
		return err
	}
	switch {
	case *scope != "replica" && *scope != "fleet":
		return usagef("--scope %q: use replica or fleet", *scope)
	case *scope == "fleet" && cf.NS != "":
		return usagef("--scope fleet covers all namespaces: drop --namespace (or CACHESVC_NAMESPACE)")
	case *scope == "replica":
		*scope = "" // the server's default: older servers know no scope
	}
	// Checked here, as warm, agent and admin check them: the server would
	// answer a bad namespace 400 (exit 1) showing it URL-escaped.
	if err := cf.checkURL(); err != nil {
		return err
	}
	if cf.NS != "" {
		if err := cf.checkNamespace(); err != nil {
			return err
		}
	}
	token, err := cf.token.resolve()
	if err != nil {
		return err
	}
	hc, err := cf.httpClient() // clientflags.go: --client-cert
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	r, err := report.FetchScope(ctx, hc, cf.Server, cf.NS, token, *scope)
	var se *report.StatusError
	if errors.As(err, &se) && se.Status == http.StatusForbidden && cf.NS == "" && *scope == "" {
		// stats shows every namespace by default, which needs admin on
		// "*": a team's read token is refused until it names its namespace.
		return fmt.Errorf("%w (stats of every namespace need admin on \"*\": give --namespace NS for a namespace the token reads)", err)
	}
	if errors.As(err, &se) && se.Code == "fleet_unavailable" {
		// The heartbeats live in the bucket, but the replica still answers
		// for itself, as the dashboard shows when its fleet view fails.
		return fmt.Errorf("%w (cachesvc stats without --scope fleet shows this replica's own figures)", err)
	}
	if err != nil {
		return serverHint(err, cf.Server)
	}
	if *asJSON {
		// The very numbers the tables are printed from, for scripts.
		enc := json.NewEncoder(sio.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return report.Render(sio.Stdout, r, report.Options{Server: strings.TrimRight(cf.Server, "/"), Namespace: cf.NS})
}

// openStats opens the persisted statistics in <data>/stats, sampling the
// store's usage at each flush. Close it after the server has shut down.
func openStats(data string, st interface{ Usage() store.Usage }, logger *slog.Logger) (*stats.Stats, error) {
	dir := filepath.Join(data, "stats")
	s, err := stats.Open(stats.Config{
		Dir:    dir,
		Logger: logger,
		Usage:  func() stats.Usage { return stats.UsageOf(st.Usage()) },
	})
	if err != nil {
		return nil, fmt.Errorf("open stats %s: %w", dir, err)
	}
	return s, nil
}

// statsCloseWait bounds how long serve's exit waits for the statistics to
// close before it closes the store anyway (closeStep.wait). Their Close
// saves at most a minute of counters into a small Badger database of their
// own, well under a second when the disk answers; a Close that hangs
// longer (a stuck fsync, a lock) would otherwise keep the store, which
// closes after the statistics, from closing at all.
const statsCloseWait = 3 * time.Second

// closeStats closes the statistics at serve's exit; a variable so that a
// test can make it hang, as no real cause can be made on demand.
var closeStats = (*stats.Stats).Close

// maxPendingEvictionKinds bounds what statsHooks keeps before the
// statistics attach: (namespace, backend, reason) kinds past it count
// under no namespace (the statistics' _other), still by reason.
const maxPendingEvictionKinds = 4096

// evictionKind is what the statistics count an eviction by.
type evictionKind struct{ ns, backend, reason string }

// statsHooks carries the store's eviction and quarantine hooks to the
// statistics, which open after the store (they sample its usage). The
// store evicts while it opens (down to a lowered --max-size) and its
// expiry loop's first pass starts at once, before the statistics exist:
// statsHooks keeps those evictions' counts and records them when the
// statistics attach, so the persisted counts (totals.evictions, by reason,
// cachesvc_namespace_evictions_total) have them too. Before, they were
// dropped. The entries evicted then need no ForgetEntry: the index that
// explains misses is seeded from the store after it opened.
type statsHooks struct {
	mu      sync.Mutex
	st      *stats.Stats // nil until attach
	pending map[evictionKind]int64
}

// evicted is store.Config.OnEvict.
func (h *statsHooks) evicted(m store.Meta, reason string) {
	h.mu.Lock()
	st := h.st
	if st == nil {
		k := evictionKind{m.Namespace, m.Backend, reason}
		if _, ok := h.pending[k]; !ok && len(h.pending) >= maxPendingEvictionKinds {
			k = evictionKind{reason: reason}
		}
		if h.pending == nil {
			h.pending = make(map[evictionKind]int64)
		}
		h.pending[k]++
	}
	h.mu.Unlock()
	if st != nil {
		st.RecordEvictions(m.Namespace, m.Backend, reason, 1)
		st.ForgetEntry(m.Namespace, m.Backend, m.Key)
	}
}

// quarantined is store.Config.OnQuarantine.
func (h *statsHooks) quarantined(ns string, key store.Key) {
	h.mu.Lock()
	st := h.st
	h.mu.Unlock()
	if st != nil {
		st.ForgetEntry(ns, "", key)
	}
}

// attach records the evictions kept so far in st and sends later ones
// straight to it.
func (h *statsHooks) attach(st *stats.Stats) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, n := range h.pending {
		st.RecordEvictions(k.ns, k.backend, k.reason, n)
	}
	h.st, h.pending = st, nil
}
