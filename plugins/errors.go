package plugins

import "errors"

// Sentinel errors. A failed call returns an *Error whose Kind is one of these,
// so callers match with errors.Is and show Error() to people.
var (
	// ErrPlugin: the plugin rejected the signature with its own message
	// ({"error": ...}). The instance is healthy and kept.
	ErrPlugin = errors.New("plugin rejected the signature")
	// ErrTimeout: the call exceeded Config.CallTimeout.
	ErrTimeout = errors.New("plugin timed out")
	// ErrTrap: the plugin trapped, panicked or exited.
	ErrTrap = errors.New("plugin crashed")
	// ErrMemory: the plugin ran out of memory under Config.MaxMemoryBytes,
	// or (load time) declares a minimum memory over it.
	ErrMemory = errors.New("plugin ran out of memory")
	// ErrOutput: the plugin's output was malformed, out of bounds or larger
	// than Config.MaxOutputBytes.
	ErrOutput = errors.New("plugin output invalid")
	// ErrInputTooLarge: the signature exceeds Config.MaxInputBytes; the plugin
	// was not called.
	ErrInputTooLarge = errors.New("signature too large for plugin")
	// ErrBusy: every instance of the plugin stayed busy for
	// Config.AcquireTimeout.
	ErrBusy = errors.New("plugin busy")
	// ErrInvalid: a module is not a valid ABI 1 plugin (load time).
	ErrInvalid = errors.New("invalid plugin")
	// ErrDuplicate: two plugins claim one name or backend (load time).
	ErrDuplicate = errors.New("duplicate plugin")
	// ErrClosed: the host was closed.
	ErrClosed = errors.New("plugin host closed")
)

// Error describes one failed plugin call.
type Error struct {
	// Plugin is the plugin's name@version.
	Plugin string
	// Kind is one of the sentinel errors above.
	Kind error
	// Message is a human sentence: the plugin's own message for ErrPlugin,
	// otherwise what went wrong (with the tail of its stderr after a crash).
	Message string
}

// Error returns "plugin NAME@VERSION: MESSAGE" (just MESSAGE for ErrPlugin, the
// plugin's own words).
func (e *Error) Error() string {
	if e.Kind == ErrPlugin {
		return e.Message
	}
	return "plugin " + e.Plugin + ": " + e.Message
}

// Unwrap returns Kind.
func (e *Error) Unwrap() error { return e.Kind }
