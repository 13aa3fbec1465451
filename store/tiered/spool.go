package tiered

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/cachesvc/cachesvc/store"
)

// spool is one key's fetch from the shared tier into a local file (or, for
// a small entry, memory). One goroutine (the tail of Store.startDownload) copies the shared tier's stream into the file
// as fast as the tier sends it; every Get of the key, the first included,
// reads the file behind it through a follower, so that no reader paces the
// download, another reader or the fill. The shared tier's reader withholds
// an entry's last buffer until the whole digest matches, so the file never
// holds an entry's complete bytes unless they are verified, and a follower
// never reaches the end of a bad entry.
//
// The file is unlinked as soon as it is created: it lives as long as its
// descriptor, so a crash leaves nothing to clean up. A few files are kept
// for reuse once their spool is done (Store.recycle): writing into pages a
// file already has costs a fifth of writing into new ones (0.8 against
// 4.5 ms per 16 MiB here), which is most of what a spool adds to a read.
// A reused file's old bytes past the new entry's size are never read.
type spool struct {
	id  string // ns/key, its name in Store.spools
	ns  string
	key store.Key

	ready chan struct{} // closed once the fields below it are set
	m     store.Meta
	f     *os.File // nil unless the download started into a file
	mem   []byte   // a small entry's verified bytes, held instead of a file
	hot   bool     // the hot tier had the entry: read it there
	skip  bool     // no spool (full): read the shared tier directly
	err   error    // the shared tier's answer when the download did not start

	mu      sync.Mutex
	written int64
	done    bool          // the download ended
	derr    error         // its error, nil when complete and verified
	changed chan struct{} // closed and replaced at each change
	refs    int           // followers plus one for the download and fill
	release func()        // called once refs reaches 0: returns the reservation and file
}

func newSpool(ns string, key store.Key) *spool {
	return &spool{ns: ns, key: key, ready: make(chan struct{}), changed: make(chan struct{}), refs: 1}
}

// Write appends p to the file (the download's io.Writer).
func (sp *spool) Write(p []byte) (int, error) {
	n, err := sp.f.WriteAt(p, sp.written) // written changes only here
	sp.mu.Lock()
	sp.written += int64(n)
	close(sp.changed)
	sp.changed = make(chan struct{})
	sp.mu.Unlock()
	if err != nil {
		return n, fmt.Errorf("write spool file: %w", err)
	}
	return n, nil
}

// end records how the download ended.
func (sp *spool) end(err error) {
	sp.mu.Lock()
	sp.done, sp.derr = true, err
	close(sp.changed)
	sp.changed = make(chan struct{})
	sp.mu.Unlock()
}

// acquire adds a follower's reference; it fails once the spool is released.
func (sp *spool) acquire() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.refs == 0 {
		return false
	}
	sp.refs++
	return true
}

// unref drops a reference; the last one closes the file.
func (sp *spool) unref() {
	sp.mu.Lock()
	sp.refs--
	last := sp.refs == 0
	sp.mu.Unlock()
	if !last {
		return
	}
	if sp.release != nil {
		sp.release() // returns the file to the store
	} else if sp.f != nil {
		_ = sp.f.Close()
	}
}

// wait returns once the spool holds more than off bytes or the download
// has ended, with the bytes written and the download's end.
func (sp *spool) wait(off int64) (written int64, done bool, err error) {
	for {
		sp.mu.Lock()
		written, done, err, ch := sp.written, sp.done, sp.derr, sp.changed
		sp.mu.Unlock()
		if written > off || done {
			return written, done, err
		}
		<-ch
	}
}

// follower reads bytes [off, end) of a spool as the download writes them.
type follower struct {
	sp     *spool
	off    int64
	end    int64
	closed bool
}

var errReaderClosed = errors.New("read entry: reader is closed")

// Read implements io.Reader.
func (r *follower) Read(p []byte) (int, error) {
	if r.closed {
		return 0, errReaderClosed
	}
	if r.off >= r.end {
		if r.end == r.sp.m.Size {
			// The end of the entry: only a verified download reaches it
			// (this matters for an empty entry, which withholds nothing).
			if _, _, err := r.sp.wait(r.end); err != nil {
				return 0, err
			}
		}
		return 0, io.EOF
	}
	written, _, err := r.sp.wait(r.off)
	if written <= r.off {
		if err == nil {
			err = io.ErrUnexpectedEOF // ended short without an error: cannot happen
		}
		return 0, err
	}
	want := min(int64(len(p)), min(written, r.end)-r.off)
	if r.sp.mem != nil {
		n := copy(p[:want], r.sp.mem[r.off:])
		r.off += int64(n)
		return n, nil
	}
	n, rerr := r.sp.f.ReadAt(p[:want], r.off)
	r.off += int64(n)
	if rerr != nil && rerr != io.EOF {
		return n, fmt.Errorf("read spool file: %w", rerr)
	}
	return n, nil
}

// bufPool holds the followers' WriteTo buffers.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// WriteTo copies the rest to w through one pooled buffer (io.Copy prefers
// it to Read, and the destination's ReadFrom would read in small pieces).
func (r *follower) WriteTo(w io.Writer) (int64, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	var total int64
	for {
		n, err := r.Read(*bp)
		if n > 0 {
			m, werr := w.Write((*bp)[:n])
			total += int64(m)
			if werr != nil {
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// Close releases the follower's reference to the spool.
func (r *follower) Close() error {
	if !r.closed {
		r.closed = true
		r.sp.unref()
	}
	return nil
}
