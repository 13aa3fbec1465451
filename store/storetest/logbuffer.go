package storetest

import (
	"bytes"
	"sync"
)

// LogBuffer is a bytes.Buffer that a store's goroutines may log into (a
// slog handler's writer) while a test reads it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p, as io.Writer asks.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
