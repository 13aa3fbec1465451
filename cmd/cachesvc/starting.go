package main

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cachesvc/cachesvc/wire"
)

// startingHandoverWait bounds how long the hand-over waits for the answers
// in progress: past the responder's ReadHeaderTimeout, only a connection
// that never sent a request is left.
const startingHandoverWait = 6 * time.Second

// startingCode is the error code of every answer but /healthz while serve
// starts.
const startingCode = "starting"

// startingResponder answers on serve's listener while serve opens its store
// (a scan of every entry: seconds for hundreds of thousands), joins the
// fleet and loads its plugins. Before it, the listener was bound but
// unanswered: probes hung until their timeout, and a liveness probe killed
// a process in the middle of its start, over and over. It answers /healthz
// 200 {"status":"starting"} (alive), /readyz and everything else 503
// "starting" with Retry-After, and closes each connection after its answer
// so that none outlives it.
type startingResponder struct {
	srv     *http.Server
	ln      *handoffListener
	done    chan struct{}
	conns   sync.WaitGroup // open connections (ConnState)
	stopped sync.Once
	// idPrefix and ids make the X-Request-Id of a request that came
	// without a usable one, as the API server does: a random prefix per
	// start and a counter.
	idPrefix string
	ids      atomic.Uint64
}

// answerWhileStarting starts a startingResponder on ln, over TLS when
// tlsCfg is set; it returns nil (and serve stays silent while it starts, as
// before) if ln cannot hand over (not TCP).
func answerWhileStarting(ln net.Listener, tlsCfg *tls.Config, logger *slog.Logger) *startingResponder {
	tcp, ok := ln.(*net.TCPListener)
	if !ok {
		return nil
	}
	hl := &handoffListener{TCPListener: tcp}
	var serveOn net.Listener = hl
	if tlsCfg != nil {
		serveOn = tls.NewListener(hl, tlsCfg)
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	r := &startingResponder{ln: hl, done: make(chan struct{}),
		idPrefix: strconv.FormatUint(binary.LittleEndian.Uint64(b[:]), 36) + "-s"}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.answer), ReadHeaderTimeout: startingHandoverWait - time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)}
	r.srv.SetKeepAlivesEnabled(false)
	r.srv.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			r.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			r.conns.Done()
		}
	}
	logger.Info("starting: /healthz answers 200, /readyz and the rest 503 starting, until the store is open and the server serves",
		"addr", ln.Addr().String())
	go func() {
		defer close(r.done)
		if err := r.srv.Serve(serveOn); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("answering while starting ended", "err", err)
		}
	}()
	return r
}

// answer is the startingResponder's handler. Like every answer of the
// API server, its answers carry X-Request-Id (the client's when it is a
// sane one) and its error names it, so a client's report of a 503 leads
// to the right start.
func (r *startingResponder) answer(w http.ResponseWriter, req *http.Request) {
	id := req.Header.Get(wire.HeaderRequestID)
	if !wire.ValidRequestID(id) {
		id = r.idPrefix + strconv.FormatUint(r.ids.Add(1), 36)
	}
	w.Header().Set(wire.HeaderRequestID, id)
	w.Header().Set("Content-Type", "application/json")
	if req.URL.Path == "/healthz" {
		_ = json.NewEncoder(w).Encode(map[string]string{"status": startingCode, "version": version})
		return
	}
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(wire.ErrorBody{Error: wire.ErrorObject{Code: startingCode,
		Message: "The server is starting: it opens its store and loads its plugins; retry in a moment.", RequestID: id}})
}

// stop ends the responder and leaves the listener open, its next
// connections waiting for the API server. Connections it accepted get
// their answers first (each is one short request). Only the first call
// does anything: serve calls it before serving, and again (deferred) on a
// start that fails.
func (r *startingResponder) stop() {
	if r == nil {
		return
	}
	r.stopped.Do(r.handOver)
}

// handOver is stop's work. It does not call the http.Server's Shutdown,
// which drops a request read while it runs without an answer (net/http
// leaves the retry to the client): it stops accepting, and waits for each
// accepted connection's one answer (ReadHeaderTimeout bounds one that sends
// nothing), closing what is left after that.
func (r *startingResponder) handOver() {
	_ = r.ln.Close() // Accept returns; ln stays open
	<-r.done
	answered := make(chan struct{})
	go func() { r.conns.Wait(); close(answered) }()
	select {
	case <-answered:
	case <-time.After(startingHandoverWait):
		_ = r.srv.Close()
	}
	_ = r.ln.TCPListener.SetDeadline(time.Time{})
}

// handoffListener is a TCP listener whose Close stops its Accept without
// closing the socket, so that another server can serve on it next.
type handoffListener struct {
	*net.TCPListener
	closed atomic.Bool
}

// Accept accepts a connection until Close.
func (l *handoffListener) Accept() (net.Conn, error) {
	if l.closed.Load() {
		return nil, net.ErrClosed
	}
	c, err := l.TCPListener.Accept()
	if err != nil && l.closed.Load() {
		return nil, net.ErrClosed
	}
	return c, err
}

// Close wakes a pending Accept (a deadline in the past) and makes it and
// every later one fail; the socket stays open.
func (l *handoffListener) Close() error {
	l.closed.Store(true)
	return l.TCPListener.SetDeadline(time.Now())
}
