package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePprof serves the net/http/pprof handlers on addr (a separate listener,
// never the API's, so profiles are not exposed to API clients) until the
// returned stop function is called. It returns the bound address.
func servePprof(addr string, logger *slog.Logger) (bound string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--pprof-addr %s: cannot listen for profiling (give a free host:port, or leave --pprof-addr empty for no profiling): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("pprof server ended", "err", err)
		}
	}()
	logger.Info("serving pprof", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return ln.Addr().String(), func() { _ = hs.Close() }, nil
}
