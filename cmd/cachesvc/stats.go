package main

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/cachesvc/cachesvc/stats/report"
)

// runStats prints a server's statistics as tables: `cachesvc stats --server
// URL [--ns NS]`.
func runStats(ctx context.Context, args []string, sio stdio) error {
	var server, ns, token string
	var timeout time.Duration
	fs := newFlagSet("stats", "Print a server's hit rate, compile time saved, runs and misses as tables.", sio)
	fs.StringVar(&server, "server", "http://127.0.0.1:8080", "cachesvc server `URL`")
	fs.StringVar(&ns, "ns", "", "only this `namespace` (default: all)")
	fs.StringVar(&token, "token", "", "bearer `token` for the server, if it requires one")
	fs.DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	if err := parseFlags(fs, args, sio); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := report.Fetch(ctx, http.DefaultClient, server, ns, token)
	if err != nil {
		return err
	}
	return report.Render(sio.Stdout, r, report.Options{Server: strings.TrimRight(server, "/"), Namespace: ns})
}
