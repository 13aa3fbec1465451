package tiered

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cachesvc/cachesvc/cachekey"
	"github.com/cachesvc/cachesvc/store"
)

// The upload queue of ModeBehind: a directory holding, per queued entry,
// its bytes (<seq>.body) and a small JSON record (<seq>.json) naming the
// entry, its size, SHA-256 and metadata. The queue keeps its own copy of
// the bytes rather than pinning the hot tier's: a queued entry the hot tier
// evicts (or loses to a quarantine) is still uploaded, and a Get of it on a
// hot miss refills the hot tier from the queue's copy.
//
// A Put writes the body to tmp-<seq>.body while hashing it, checks the
// declared size and digest, writes tmp-<seq>.json, renames the body and
// then the record into place: the record's rename is the commit, so after a
// crash (kill -9) a record always has its whole body, and tmp- files and
// bodies without a record are deleted when the queue is opened. Only then
// does the Put write the hot tier (from the queue's file); if the hot tier
// refuses it (conflict, full, ...) the item is removed and the Put fails.
// The item joins the in-memory queue (and can be uploaded) only after the
// hot tier's commit; a crash between the two leaves a committed item that
// the next process uploads: an unacknowledged but complete, verified entry. Queue files are not
// fsynced: like the hot tier without SyncWrites, they survive kill -9 (the
// page cache) but not necessarily a power loss; a damaged body then fails
// its digest at upload and is dropped (logged, counted), never uploaded.
//
// Uploaders (Config.Uploaders) take the oldest items. An upload the shared
// tier refuses as unavailable is retried, the uploader backing off from
// 100ms to 30s while failures go on; one refused for good is dropped:
// store.ErrConflict means another replica stored different bytes under the
// key first, and since the fleet's first writer wins the hot copy is
// deleted so that this replica serves the fleet's bytes from then on.

const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// qrecord is a queued entry's record file.
type qrecord struct {
	Seq            uint64            `json:"seq"`
	Namespace      string            `json:"namespace"`
	Key            string            `json:"key"`
	Size           int64             `json:"size"`
	SHA256         string            `json:"sha256"`
	Queued         time.Time         `json:"queued"`
	Backend        string            `json:"backend,omitempty"`
	Name           string            `json:"name,omitempty"`
	CompileSeconds float64           `json:"compile_seconds,omitempty"`
	Writer         string            `json:"writer,omitempty"`
	Run            string            `json:"run,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Components     map[string]string `json:"components,omitempty"`
}

// qitem is a queued entry in memory.
type qitem struct {
	rec       qrecord
	m         store.Meta
	uploading bool
	removed   bool // deleted while uploading: the uploader removes the files
}

type queue struct {
	s   *Store
	dir string

	mu       sync.Mutex
	items    map[string]*qitem // by ns/key
	bytes    int64             // of items and of bodies being written
	reserved int               // entries being written
	seq      uint64
	wake     chan struct{}
	hurry    chan struct{} // closed by Flush (flush.go)
	hurried  sync.Once
	spell    failSpell // upload.go
}

func openQueue(s *Store, dir string) (*queue, error) {
	if dir == "" {
		return nil, fmt.Errorf("open upload queue: %w: ModeBehind needs Config.QueueDir", store.ErrInvalid)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open upload queue: %w", err)
	}
	q := &queue{s: s, dir: dir, items: make(map[string]*qitem), wake: make(chan struct{}, 1), hurry: make(chan struct{})}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open upload queue: %w", err)
	}
	for _, de := range names {
		name := de.Name()
		seq, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSuffix(name, ".json"), ".body"), 10, 64)
		if strings.HasPrefix(name, "tmp-") || err != nil {
			_ = os.Remove(filepath.Join(dir, name)) // a Put cut short, or not ours
			continue
		}
		q.seq = max(q.seq, seq)
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		if err := q.load(seq); err != nil {
			s.log.Warn("dropping a damaged upload queue record", "file", name, "err", err)
			q.removeFiles(seq)
		}
	}
	// Bodies without a record were cut short before their commit.
	for _, de := range names {
		if seq, err := strconv.ParseUint(strings.TrimSuffix(de.Name(), ".body"), 10, 64); err == nil && strings.HasSuffix(de.Name(), ".body") {
			if !q.hasSeq(seq) {
				_ = os.Remove(filepath.Join(dir, de.Name()))
			}
		}
	}
	return q, nil
}

func (q *queue) path(seq uint64, ext string) string {
	return filepath.Join(q.dir, fmt.Sprintf("%020d%s", seq, ext))
}

func (q *queue) hasSeq(seq uint64) bool {
	for _, it := range q.items {
		if it.rec.Seq == seq {
			return true
		}
	}
	return false
}

// load reads the record seq and checks its body's size.
func (q *queue) load(seq uint64) error {
	b, err := os.ReadFile(q.path(seq, ".json"))
	if err != nil {
		return err
	}
	var rec qrecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	m, err := rec.meta()
	if err != nil {
		return err
	}
	fi, err := os.Stat(q.path(seq, ".body"))
	if err != nil {
		return err
	}
	if fi.Size() != rec.Size || rec.Seq != seq {
		return fmt.Errorf("body of %d bytes, record says %d (seq %d)", fi.Size(), rec.Size, rec.Seq)
	}
	q.items[rec.Namespace+"/"+rec.Key] = &qitem{rec: rec, m: m}
	q.bytes += rec.Size
	return nil
}

func (r qrecord) meta() (store.Meta, error) {
	key, err := cachekey.ParseKey(r.Key)
	if err != nil {
		return store.Meta{}, err
	}
	sum, err := hex.DecodeString(r.SHA256)
	if err != nil || len(sum) != 32 {
		return store.Meta{}, fmt.Errorf("bad sha256 %q", r.SHA256)
	}
	if err := store.CheckNamespace("queued entry", r.Namespace); err != nil {
		return store.Meta{}, err
	}
	m := store.Meta{
		Namespace: r.Namespace, Key: key, Size: r.Size, Created: r.Queued, LastAccess: r.Queued,
		Backend: r.Backend, Name: r.Name, CompileSeconds: r.CompileSeconds, Writer: r.Writer, Run: r.Run,
		Labels: r.Labels, Components: r.Components,
	}
	copy(m.SHA256[:], sum)
	return m, nil
}

func (m *qitem) opts() store.PutOptions {
	sum := m.m.SHA256
	return store.PutOptions{
		Size: m.m.Size, SHA256: &sum, Backend: m.m.Backend, Name: m.m.Name, CompileSeconds: m.m.CompileSeconds,
		Writer: m.m.Writer, Run: m.m.Run, Labels: m.m.Labels, Components: m.m.Components,
	}
}

func (q *queue) removeFiles(seq uint64) {
	_ = os.Remove(q.path(seq, ".json")) // the record first: no record, no item
	_ = os.Remove(q.path(seq, ".body"))
}

// depth returns the queue's entries, bytes and oldest item's time.
func (q *queue) depth() (entries, bytes int64, oldest time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, it := range q.items {
		if oldest.IsZero() || it.rec.Queued.Before(oldest) {
			oldest = it.rec.Queued
		}
	}
	return int64(len(q.items)), q.bytes, oldest
}

// stat returns a queued entry's metadata.
func (q *queue) stat(ns string, key store.Key) (store.Meta, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	it := q.items[ns+"/"+key.String()]
	if it == nil {
		return store.Meta{}, false
	}
	return it.m, true
}

// remove takes (ns, key) out of the queue; it reports whether it was queued.
func (q *queue) remove(ns string, key store.Key) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	id := ns + "/" + key.String()
	it := q.items[id]
	if it == nil {
		return false
	}
	q.drop(id, it)
	return true
}

// drop forgets an item (q.mu held) and removes its files, unless an
// uploader has them open: it removes them when it is done.
func (q *queue) drop(id string, it *qitem) {
	if q.items[id] == it {
		delete(q.items, id)
		q.bytes -= it.rec.Size
	}
	if it.uploading {
		it.removed = true
		return
	}
	q.removeFiles(it.rec.Seq)
}

// refill puts a queued entry the hot tier lacks (evicted, quarantined) back
// into the hot tier from the queue's copy, which the hot tier verifies
// against the digest; ok is false when the entry is not queued.
func (q *queue) refill(ctx context.Context, ns string, key store.Key) (ok bool, err error) {
	q.mu.Lock()
	it := q.items[ns+"/"+key.String()]
	if it == nil {
		q.mu.Unlock()
		return false, nil
	}
	f, err := os.Open(q.path(it.rec.Seq, ".body"))
	q.mu.Unlock()
	if err != nil {
		return false, nil // uploaded and removed meanwhile: the shared tier has it
	}
	defer f.Close()
	if _, err := q.s.hot.Put(ctx, ns, key, f, it.opts()); err != nil {
		return true, fmt.Errorf("get entry %s/%s: refill the hot tier from the upload queue: %w", ns, key, err)
	}
	return true, nil
}

// put is Store.Put in ModeBehind (see the package doc and the top of this
// file).
func (q *queue) put(ctx context.Context, ns string, key store.Key, r io.Reader, opts store.PutOptions) (store.PutResult, error) {
	var res store.PutResult
	if err := store.CheckNamespace("put entry", ns); err != nil {
		return res, err
	}
	if err := store.CheckPutOptions(opts); err != nil {
		return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
	}
	seq, err := q.admit(max(opts.Size, 0))
	if err != nil {
		q.s.n.queueFull.Add(1)
		return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
	}
	reserved := max(opts.Size, 0)
	it, err := q.write(ctx, seq, ns, key, r, opts, &reserved)
	if err != nil {
		if errors.Is(err, store.ErrQueueFull) {
			q.s.n.queueFull.Add(1)
		}
		q.unadmit(reserved)
		return res, fmt.Errorf("put entry %s/%s: %w", ns, key, err)
	}
	// The item is committed on disk; it joins the queue (and may be
	// uploaded) only once the hot tier has the entry too.
	f, err := os.Open(q.path(seq, ".body"))
	if err == nil {
		res, err = q.s.hot.Put(ctx, ns, key, f, it.opts())
		f.Close()
	}
	id := ns + "/" + key.String()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reserved--
	prev := q.items[id]
	if err != nil || prev != nil && prev.rec.SHA256 == it.rec.SHA256 {
		// Refused, or identical bytes are queued already (keep the older).
		q.bytes -= it.rec.Size
		q.removeFiles(seq)
		if err != nil {
			return res, fmt.Errorf("put entry %s/%s: hot tier: %w", ns, key, err)
		}
		return res, nil
	}
	if prev != nil {
		// Other bytes were queued and have left the hot tier since: the
		// hot tier's answer is the replica's answer.
		q.drop(id, prev)
	}
	q.items[id] = it
	q.s.emit(Event{Kind: EventQueued, Namespace: ns, Bytes: it.rec.Size})
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return res, nil
}

// admit reserves a place and size bytes in the queue, or fails with
// store.ErrQueueFull.
func (q *queue) admit(size int64) (uint64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := len(q.items) + q.reserved; n >= q.s.cfg.MaxQueueEntries {
		if n == 1 { // --upload-queue-entries 1
			return 0, fmt.Errorf("%w: 1 entry queued", store.ErrQueueFull)
		}
		return 0, fmt.Errorf("%w: %d entries queued", store.ErrQueueFull, n)
	}
	if q.bytes+size > q.s.cfg.MaxQueueBytes {
		return 0, fmt.Errorf("%w: %d bytes queued, %d more do not fit", store.ErrQueueFull, q.bytes, size)
	}
	q.reserved++
	q.bytes += size
	q.seq++
	return q.seq, nil
}

// unadmit returns an admission's place and reserved bytes.
func (q *queue) unadmit(reserved int64) {
	q.mu.Lock()
	q.reserved--
	q.bytes -= reserved
	q.mu.Unlock()
}

// grow reserves n more bytes for a body of undeclared size.
func (q *queue) grow(n int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.bytes+n > q.s.cfg.MaxQueueBytes {
		return fmt.Errorf("%w: %d bytes queued", store.ErrQueueFull, q.bytes)
	}
	q.bytes += n
	return nil
}

// write stores the body as item seq (see the top of the file), checking
// what opts declared; *reserved tracks the bytes reserved for it.
func (q *queue) write(ctx context.Context, seq uint64, ns string, key store.Key, r io.Reader, opts store.PutOptions, reserved *int64) (it *qitem, err error) {
	tmpBody, tmpRec := q.path(seq, ".body.tmp"), q.path(seq, ".json.tmp")
	tmpBody = filepath.Join(q.dir, "tmp-"+filepath.Base(tmpBody))
	tmpRec = filepath.Join(q.dir, "tmp-"+filepath.Base(tmpRec))
	defer func() {
		if err != nil {
			_ = os.Remove(tmpBody)
			_ = os.Remove(tmpRec)
			q.removeFiles(seq)
			err = diskFull(q.dir, err)
		}
	}()
	f, err := os.OpenFile(tmpBody, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("queue body: %w", err)
	}
	h := sha256.New()
	w := &queueWriter{q: q, ctx: ctx, w: io.MultiWriter(f, h), declared: opts.Size, reserved: reserved}
	n, err := io.Copy(w, r)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("queue body: %w", cerr)
	}
	if err != nil {
		if w.err != nil {
			err = w.err
		}
		return nil, err
	}
	if opts.Size >= 0 && n != opts.Size {
		return nil, fmt.Errorf("body of %d bytes, declared %d: %w", n, opts.Size, store.ErrSizeMismatch)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	if opts.SHA256 != nil && *opts.SHA256 != sum {
		return nil, fmt.Errorf("body sha256 %x, declared %x: %w", sum, *opts.SHA256, store.ErrDigestMismatch)
	}
	rec := qrecord{
		Seq: seq, Namespace: ns, Key: key.String(), Size: n, SHA256: hex.EncodeToString(sum[:]), Queued: time.Now().UTC(),
		Backend: opts.Backend, Name: opts.Name, CompileSeconds: opts.CompileSeconds, Writer: opts.Writer, Run: opts.Run,
		Labels: opts.Labels, Components: opts.Components,
	}
	js, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("queue record: %w", err)
	}
	if err := os.WriteFile(tmpRec, js, 0o644); err != nil {
		return nil, fmt.Errorf("queue record: %w", err)
	}
	if err := os.Rename(tmpBody, q.path(seq, ".body")); err != nil {
		return nil, fmt.Errorf("queue body: %w", err)
	}
	if err := os.Rename(tmpRec, q.path(seq, ".json")); err != nil { // the commit
		return nil, fmt.Errorf("queue record: %w", err)
	}
	m, err := rec.meta()
	if err != nil {
		return nil, err
	}
	return &qitem{rec: rec, m: m}, nil
}

// queueWriter writes a queued body, enforcing the declared size and the
// queue's byte bound (growing the reservation of an undeclared size).
type queueWriter struct {
	q        *queue
	ctx      context.Context
	w        io.Writer
	n        int64
	declared int64
	reserved *int64
	err      error // the reason it refused, over io.Copy's wrapping
}

func (w *queueWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		w.err = err
		return 0, err
	}
	w.n += int64(len(p))
	if w.declared >= 0 && w.n > w.declared {
		w.err = fmt.Errorf("body longer than the declared %d bytes: %w", w.declared, store.ErrSizeMismatch)
		return 0, w.err
	}
	if more := w.n - *w.reserved; more > 0 {
		if err := w.q.grow(more); err != nil {
			w.err = err
			return 0, err
		}
		*w.reserved += more
	}
	if err := w.q.s.checkDisk(len(p)); err != nil { // diskfull.go
		w.err = err
		return 0, err
	}
	return w.w.Write(p)
}

// start runs the uploaders.
func (q *queue) start() {
	for range q.s.cfg.Uploaders {
		q.s.wg.Add(1)
		go q.uploader()
	}
}

// next claims the oldest item free to upload, or nil.
func (q *queue) next() *qitem {
	q.mu.Lock()
	defer q.mu.Unlock()
	var best *qitem
	for _, it := range q.items {
		if !it.uploading && (best == nil || it.rec.Seq < best.rec.Seq) {
			best = it
		}
	}
	if best != nil {
		best.uploading = true
	}
	return best
}

// close does nothing the next process needs: the queue is its files.
func (q *queue) close() error { return nil }
