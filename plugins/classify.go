package plugins

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero/sys"
)

// classify turns an error from a wasm call into an *Error.
func (p *Plugin) classify(ctx context.Context, stderr *headWriter, err error) error {
	tail := stderr.String()
	var ee *sys.ExitError
	if errors.As(err, &ee) {
		switch ee.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return p.fail(ErrTimeout, "did not finish within %s", p.host.cfg.CallTimeout)
		case sys.ExitCodeContextCanceled:
			return fmt.Errorf("call plugin %s: %w", p.info.ID, context.Canceled)
		}
	}
	if strings.Contains(tail, "out of memory") {
		return p.fail(ErrMemory, "exceeded its memory limit of %d MiB: %s", p.host.cfg.MaxMemoryBytes>>20, lastLines(tail, 2))
	}
	msg := err.Error()
	if tail != "" {
		msg += "; stderr: " + lastLines(tail, 6)
	}
	return p.fail(ErrTrap, "%s", msg)
}

// lastLines returns up to n trailing non-empty lines of s, joined by " | ".
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	var out []string
	for i := 0; i < len(lines) && len(out) < n; i++ {
		if l := strings.TrimSpace(lines[i]); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, " | ")
}

// headWriter keeps the first max bytes written to it (a Go panic prints its
// cause first; goroutine dumps follow).
type headWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *headWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - len(w.buf); room > 0 {
		w.buf = append(w.buf, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

func (w *headWriter) reset() {
	w.mu.Lock()
	w.buf = w.buf[:0]
	w.mu.Unlock()
}

func (w *headWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}
