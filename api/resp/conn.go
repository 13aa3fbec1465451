package resp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/tidwall/redcon"

	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/limit"
)

// Input limits that do not depend on the configuration.
const (
	// minBuffer is a connection's input buffer between large commands.
	minBuffer = 4 << 10
	// shrinkAbove: a buffer grown past this for a large command is
	// replaced by a minBuffer one once the command is served.
	shrinkAbove = 64 << 10
	// inlineLimit bounds an inline (telnet-style) command line, which
	// redcon's parser scans quadratically.
	inlineLimit = 4 << 10
	// unauthenticatedLimit bounds a command sent before AUTH when the
	// server checks tokens (as Redis bounds unauthenticated bulk lengths).
	unauthenticatedLimit = 64 << 10
	// lingerTime is how long a connection closed for a protocol error keeps
	// reading (and discarding) what the client still sends, so that the
	// client reads the error instead of a connection reset.
	lingerTime = 2 * time.Second
	// lingerBytes: it discards at most max(this, 4 command limits).
	lingerBytes = 64 << 20
)

// protoError is a client fault the connection cannot recover from: it is
// answered with msg and the connection is closed.
type protoError struct {
	reason string // metric label: malformed, too_large or buffers_full
	msg    string
}

func (e *protoError) Error() string { return e.msg }

// conn is one client connection: its input buffer, its reply writer and the
// state commands set (protocol version, token, name).
type conn struct {
	s      *Server
	nc     net.Conn // the accepted connection (TLS included)
	rw     net.Conn // nc paced by the minimum transfer rate
	w      *bufio.Writer
	remote string
	id     int64

	buf  []byte // input; buf[off:] is not parsed yet
	off  int
	held int64    // cap(buf), counted in Server.buffered
	args [][]byte // reused by the parser
	// started: the read deadline of the command in buf[off:] runs.
	started bool

	resp3  bool
	name   string        // CLIENT SETNAME
	secret string        // the token AUTH accepted; "" for none
	ident  auth.Identity // who secret is
	// noauthLogged: a NOAUTH was logged for this connection (once: torch
	// turns its remote cache off after the first error, other clients may
	// retry on the same connection).
	noauthLogged bool
	// wrongpassLogged: a refused AUTH was logged for this connection
	// (once: the later ones of a client guessing tokens are counted).
	wrongpassLogged bool
	host            string // the client's IP, for Server.perHost
	running         string // name of the command dispatched last (for logs)

	result  resultKind // what the current command's reply was
	quit    bool       // QUIT: close after the reply
	broken  error      // a reply failed half-written: close
	scratch []byte     // reply encoding

	mu      sync.Mutex
	busy    bool // running a command
	closing bool // Shutdown: close when the command ends
}

func newConn(s *Server, nc net.Conn) *conn {
	var rw net.Conn = nc
	if s.cfg.MinTransferRate > 0 {
		rw = limit.NewPaceConn(nc, 0, s.cfg.MinTransferRate)
	}
	c := &conn{s: s, nc: nc, rw: rw, remote: nc.RemoteAddr().String(), id: s.nextID.Add(1)}
	c.w = bufio.NewWriterSize(countingWriter{w: rw, s: s}, 32<<10)
	return c
}

// countingWriter counts the bytes sent.
type countingWriter struct {
	w io.Writer
	s *Server
}

func (cw countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.s.metrics.sent.Add(float64(n))
	return n, err
}

// serve reads and runs commands until the client leaves, a fault ends the
// connection or Shutdown closes it.
func (c *conn) serve() {
	log := c.s.log.With("client", c.client(), "conn", c.id)
	log.Debug("resp connection opened")
	defer func() {
		// A command's panic (a bug) ends its connection, not the
		// process; the client sees a closed connection, which the
		// compiler's cache client takes as a miss.
		if r := recover(); r != nil {
			c.s.metrics.panics.Inc()
			log.Error("resp command panicked; closing the connection", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
		c.release()
		_ = c.nc.Close()
		log.Debug("resp connection closed")
	}()
	for {
		args, err := c.next()
		if err != nil {
			c.end(err, log)
			return
		}
		if !c.begin() {
			return
		}
		c.dispatch(args)
		if c.broken != nil {
			log.Warn("resp reply failed; closing the connection", "err", c.broken)
			return
		}
		if !c.finish() || c.quit {
			_ = c.flush()
			return
		}
	}
}

// end handles the error that ended reading: a protocol fault is answered
// before the connection closes; a timeout or the client leaving is not.
func (c *conn) end(err error, log *slog.Logger) {
	var pe *protoError
	if errors.As(err, &pe) {
		c.s.metrics.protoErrors.WithLabelValues(pe.reason).Inc()
		log.Info("resp protocol error; closing the connection", "err", pe.msg)
		c.replyError(pe.msg)
		_ = c.flush()
		c.linger()
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		log.Debug("resp connection timed out", "err", err)
		return
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		log.Debug("resp connection read failed", "err", err)
	}
}

// linger closes the write side and discards what the client still sends
// for a little while, so that a client blocked writing a large command gets
// to read the error reply.
func (c *conn) linger() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.CopyN(io.Discard, c.nc, max(4*c.s.limit, lingerBytes))
}

// begin marks the connection busy; false means Shutdown is closing it.
func (c *conn) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	c.busy = true
	return true
}

// finish marks the command done; false means Shutdown is closing the
// connection.
func (c *conn) finish() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy = false
	return !c.closing
}

// closeIfIdle closes the connection when it is not running a command, and
// reports whether it did.
func (c *conn) closeIfIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy {
		return false
	}
	c.closing = true
	_ = c.nc.Close()
	return true
}

// shutdown closes the connection now when it is idle, or once its current
// command ends.
func (c *conn) shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closing = true
	if !c.busy {
		_ = c.nc.Close()
	}
}

// ctx is the context commands run under.
func (c *conn) ctx() context.Context { return c.s.baseCtx }

// next returns the next complete command, reading more input as needed.
// Replies to earlier commands are flushed before it blocks on the network.
// The args point into the input buffer and are valid until the next call.
func (c *conn) next() ([][]byte, error) {
	for {
		if c.off < len(c.buf) {
			args, ok, err := c.parse()
			if err != nil {
				return nil, err
			}
			if ok {
				return args, nil
			}
		}
		if err := c.flush(); err != nil {
			return nil, err
		}
		if err := c.fill(); err != nil {
			return nil, err
		}
	}
}

// parse frames one command from the unparsed input with redcon's
// ReadNextCommand. It refuses what redcon would accept but this listener
// bounds: more arguments than any command takes, the Tile38 framing, and
// (redcon panics on some negative or overflowing bulk lengths) any panic,
// which is a malformed command.
func (c *conn) parse() (args [][]byte, ok bool, err error) {
	b := c.buf[c.off:]
	switch b[0] {
	case '*':
		if err := c.checkFrame(b); err != nil {
			return nil, false, err
		}
	case '$':
		return nil, false, &protoError{"malformed", "ERR Protocol error: expected '*', got '$'"}
	}
	defer func() {
		if r := recover(); r != nil {
			c.s.metrics.parserPanics.Inc()
			args, ok, err = nil, false, &protoError{"malformed", "ERR Protocol error: invalid bulk length"}
		}
	}()
	complete, args, _, rest, perr := redcon.ReadNextCommand(b, c.args[:0])
	if perr != nil {
		return nil, false, &protoError{"malformed", "ERR " + perr.Error()}
	}
	if !complete {
		return nil, false, nil
	}
	c.args = args[:0]
	c.off += len(b) - len(rest)
	c.started = false
	if len(args) == 0 { // "*0\r\n" or a blank line: nothing to run, as in Redis
		return c.parse0()
	}
	return args, true, nil
}

// parse0 continues past an empty command.
func (c *conn) parse0() ([][]byte, bool, error) {
	if c.off == len(c.buf) {
		return nil, false, nil
	}
	return c.parse()
}

// checkFrame reads the headers of a RESP command that have arrived (the
// "*<count>" and each "$<length>") and refuses a count or a length past the
// limits before the bytes arrive: redcon re-parses every argument on each
// read of an incomplete command, and panics on some negative or
// overflowing lengths. redcon frames the command once it is complete.
func (c *conn) checkFrame(b []byte) error {
	count, i, err := frameHeader(b, 0)
	if err != nil || i < 0 {
		return err
	}
	if most := c.maxArgs(); count > most {
		return &protoError{"too_large", fmt.Sprintf("ERR Protocol error: a command of %d arguments; at most %d are accepted", count, most)}
	}
	most, tooLarge := c.commandLimit(b)
	for range count {
		if i >= len(b) || b[i] != '$' {
			return nil // incomplete, or redcon's error
		}
		n, next, err := frameHeader(b, i)
		if err != nil || next < 0 {
			return err
		}
		if int64(n) > most {
			return &protoError{"too_large", tooLarge}
		}
		i = next + n + 2
	}
	return nil
}

// frameHeader parses the "*<n>\r\n" or "$<n>\r\n" at b[i:]: n and the index
// after it, or -1 when it has not fully arrived.
func frameHeader(b []byte, i int) (n, next int, err error) {
	const maxDigits = 20
	bad := &protoError{"malformed", "ERR Protocol error: invalid multibulk length"}
	if b[i] == '$' {
		bad.msg = "ERR Protocol error: invalid bulk length"
	}
	for j := i + 1; j < len(b); j++ {
		if b[j] != '\n' {
			if j-i > maxDigits+1 {
				return 0, 0, bad
			}
			continue
		}
		if b[j-1] != '\r' {
			return 0, 0, bad
		}
		v, perr := strconv.Atoi(string(b[i+1 : j-1]))
		if perr != nil || v < 0 {
			return 0, 0, bad
		}
		return v, j + 1, nil
	}
	if len(b)-i > maxDigits+2 {
		return 0, 0, bad
	}
	return 0, -1, nil
}

// maxArgs is the most arguments a command may have: an MGET of MaxKeys.
func (c *conn) maxArgs() int { return max(c.s.cfg.MaxKeys+1, 16) }

// commandLimit is the largest command the connection accepts now.
func (c *conn) commandLimit(pending []byte) (int64, string) {
	switch {
	case len(pending) > 0 && pending[0] != '*':
		return inlineLimit, fmt.Sprintf("ERR Protocol error: an inline command longer than %d bytes", inlineLimit)
	case c.s.cfg.Auth != nil && c.secret == "":
		return unauthenticatedLimit, fmt.Sprintf("ERR Protocol error: a command larger than %d bytes before AUTH", unauthenticatedLimit)
	}
	return c.s.limit, fmt.Sprintf("ERR Protocol error: a command larger than %d bytes (values are limited to %d bytes)",
		c.s.limit, c.s.cfg.MaxValueBytes)
}

// fill reads more input into the buffer, growing it within the command
// limit and the server's buffer budget, or shrinking it after a large
// command.
func (c *conn) fill() error {
	pending := len(c.buf) - c.off
	most, tooLarge := c.commandLimit(c.buf[c.off:])
	if int64(pending) >= most {
		return &protoError{"too_large", tooLarge}
	}
	if c.held > shrinkAbove && pending < minBuffer/2 {
		c.resize(minBuffer)
	} else if c.off > 0 {
		n := copy(c.buf, c.buf[c.off:])
		c.buf, c.off = c.buf[:n], 0
	}
	if len(c.buf) == cap(c.buf) {
		size := min(max(2*int64(cap(c.buf)), minBuffer), most)
		if !c.reserve(size - c.held) {
			return &protoError{"buffers_full", fmt.Sprintf(
				"ERR the server is receiving too many large commands at once (%d bytes buffered, its limit); retry later",
				c.s.cfg.MaxBufferedBytes)}
		}
		c.resize(int(size))
	}
	switch {
	case pending == 0:
		c.setIdleDeadline()
	case !c.started:
		c.startCommand()
	}
	n, err := c.rw.Read(c.buf[len(c.buf):cap(c.buf)])
	c.buf = c.buf[:len(c.buf)+n]
	c.s.metrics.received.Add(float64(n))
	if n > 0 {
		if pending == 0 {
			c.startCommand()
		}
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// resize moves the unparsed input into a new buffer of capacity size and
// settles the budget; the caller has reserved any growth.
func (c *conn) resize(size int) {
	nb := make([]byte, len(c.buf)-c.off, size)
	copy(nb, c.buf[c.off:])
	if d := int64(size) - c.held; d < 0 {
		c.s.buffered.Add(d)
	}
	c.buf, c.off, c.held = nb, 0, int64(size)
}

// reserve takes n bytes from the server's buffer budget.
func (c *conn) reserve(n int64) bool {
	if n <= 0 {
		return true
	}
	if c.s.buffered.Add(n) > c.s.cfg.MaxBufferedBytes {
		c.s.buffered.Add(-n)
		return false
	}
	return true
}

// release returns the buffer to the budget when the connection ends.
func (c *conn) release() {
	c.s.buffered.Add(-c.held)
	c.held, c.buf, c.off = 0, nil, 0
}

// startCommand gives the command whose first bytes have arrived
// ReadTimeout plus its size at the minimum rate to arrive in full.
func (c *conn) startCommand() {
	c.started = true
	_ = c.rw.SetReadDeadline(time.Now().Add(c.s.cfg.ReadTimeout))
}

// setIdleDeadline bounds the wait for the next command.
func (c *conn) setIdleDeadline() {
	var t time.Time
	if c.s.cfg.IdleTimeout > 0 {
		t = time.Now().Add(c.s.cfg.IdleTimeout)
	}
	_ = c.rw.SetReadDeadline(t)
}

// flush sends the buffered replies.
func (c *conn) flush() error {
	if c.w.Buffered() == 0 {
		return nil
	}
	return c.w.Flush()
}
