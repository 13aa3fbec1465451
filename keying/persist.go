package keying

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMemoSaveInterval is how often a changed memo is written to
// Config.MemoFile.
const DefaultMemoSaveInterval = 10 * time.Second

// memoFileHeader is the first line of a memo file; another first line
// (a future format, a foreign file) makes the file ignored. Format 2 adds
// each result's plugin code hash (memoRecord.Code).
const memoFileHeader = `{"cachesvc_signature_memo":2}`

// memoFileHeaderV1 is the first line of a memo file an older cachesvc
// wrote: its results do not say which plugin code computed them, so they
// are dropped (counted in MemoFileStats.OldFormat), never used.
const memoFileHeaderV1 = `{"cachesvc_signature_memo":1}`

// maxMemoLine bounds one line of a memo file: a digest, a space and one
// value no larger than a shared memo value.
const maxMemoLine = 64 + 1 + MaxSharedMemoBytes

// persister writes the local memo to Config.MemoFile in the background, so
// that digest-first lookups survive a restart. The file is a snapshot of
// the memo (its bounds bound the file: Config.MemoEntries lines and about
// Config.MemoBytes of text), one line per result, oldest first:
//
//	{"cachesvc_signature_memo":2}
//	<sha256 hex of the signature> <the shared memo's JSON value>
//
// A crash loses at most the results of the last save interval: the memo is
// a cache, and a lost result costs one full signature upload.
type persister struct {
	path     string
	interval time.Duration
	dirty    atomic.Bool
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	saves    atomic.Uint64
	failures atomic.Uint64
}

// MemoFileStats counts the memo file's activity, for metrics and tests.
type MemoFileStats struct {
	// Loaded is how many results the file held at start (before the
	// memo's bounds applied); Skipped how many lines were unreadable;
	// OldFormat how many results of a file of format 1 (written by an
	// older cachesvc, without the plugin code that computed them) were
	// dropped unread.
	Loaded, Skipped, OldFormat int
	// Saves and Failures count snapshots written and failed.
	Saves, Failures uint64
}

// startPersist loads Config.MemoFile into the memo and starts the saver.
// A missing file is an empty memo; an unreadable one is logged and
// replaced by the next save, never a reason not to start.
func (k *Keyer) startPersist() {
	if k.cfg.MemoFile == "" || k.memo == nil {
		return
	}
	if k.cfg.MemoSaveInterval <= 0 {
		k.cfg.MemoSaveInterval = DefaultMemoSaveInterval
	}
	p := &persister{path: k.cfg.MemoFile, interval: k.cfg.MemoSaveInterval,
		stop: make(chan struct{}), done: make(chan struct{})}
	k.persist = p
	loaded, skipped, old, err := k.loadMemo(p.path)
	k.fileStats.Loaded, k.fileStats.Skipped, k.fileStats.OldFormat = loaded, skipped, old
	if err != nil {
		k.logger().Warn("ignoring the signature memo file; it is rewritten at the next save", "file", p.path, "err", err)
	}
	if old > 0 {
		k.logger().Info("dropped the signature memo file's results of an older format: they do not record which plugin code computed them; "+
			"their signatures are keyed again on first use (a client sending only a digest is asked for the signature once)",
			"file", p.path, "results", old)
		p.dirty.Store(true) // rewrite the file in the current format
	}
	go k.saver()
}

func (k *Keyer) logger() *slog.Logger {
	if k.cfg.Logger != nil {
		return k.cfg.Logger
	}
	return slog.Default()
}

// loadMemo reads a memo file into the memo. Lines that do not decode are
// skipped (counted); a file without the header is ignored whole; the
// results of a file of format 1 are counted in old and dropped.
func (k *Keyer) loadMemo(path string) (loaded, skipped, old int, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, 0, nil
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("open memo file: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	first, v1 := true, false
	for lines := 0; lines < 4*k.cfg.MemoEntries; lines++ {
		line, err := readLine(r)
		if errors.Is(err, io.EOF) {
			return loaded, skipped, old, nil
		}
		if err != nil {
			return loaded, skipped, old, fmt.Errorf("read memo file line %d: %w", lines+1, err)
		}
		if first {
			switch string(line) {
			case memoFileHeader:
			case memoFileHeaderV1:
				v1 = true
			default:
				return 0, 0, 0, fmt.Errorf("memo file starts with %.40q, not %s", line, memoFileHeader)
			}
			first = false
			continue
		}
		if v1 {
			old++
			continue
		}
		digest, res, ok := decodeMemoLine(line)
		if !ok {
			skipped++
			continue
		}
		loaded++
		k.mu.Lock()
		k.memo.put(digest, res)
		k.mu.Unlock()
	}
	return loaded, skipped, old, nil
}

// readLine returns the next line without its newline, at most maxMemoLine
// bytes (a longer line is an error: the file is not ours).
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxMemoLine+1 {
			return nil, fmt.Errorf("a line is over %d bytes", maxMemoLine)
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, errors.New("the last line is cut short (a crash during a save?)")
		default:
			return nil, err
		}
	}
}

func decodeMemoLine(line []byte) ([32]byte, Result, bool) {
	var d [32]byte
	hexd, value, ok := bytes.Cut(line, []byte{' '})
	if !ok || len(hexd) != 64 {
		return d, Result{}, false
	}
	if _, err := hex.Decode(d[:], hexd); err != nil {
		return d, Result{}, false
	}
	res, err := decodeMemo(value, "", "", "")
	return d, res, err == nil
}

// saver writes the memo every interval when it changed, and once more when
// Close stops it.
func (k *Keyer) saver() {
	p := k.persist
	defer close(p.done)
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.stop:
			k.saveIfDirty()
			return
		}
		k.saveIfDirty()
	}
}

func (k *Keyer) saveIfDirty() {
	p := k.persist
	if !p.dirty.Swap(false) {
		return
	}
	if err := k.SaveMemo(); err != nil {
		p.dirty.Store(true) // try again next time
		if p.failures.Add(1) == 1 || p.failures.Load()%60 == 0 {
			k.logger().Warn("save the signature memo; digest-first lookups will not survive a restart", "file", p.path, "err", err)
		}
		return
	}
	p.saves.Add(1)
}

// SaveMemo writes the memo to Config.MemoFile now: a temporary file beside
// it, synced, then renamed over it, so a reader never sees half a file.
// Without a MemoFile it does nothing.
func (k *Keyer) SaveMemo() (err error) {
	if k.persist == nil {
		return nil
	}
	type item struct {
		d   [32]byte
		res Result
	}
	k.mu.Lock()
	items := make([]item, 0, k.memo.len())
	k.memo.oldestFirst(func(d [32]byte, r Result) { items = append(items, item{d, r}) })
	k.mu.Unlock()

	path := k.persist.path
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("save memo file: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 64<<10)
	w.WriteString(memoFileHeader + "\n")
	var hexd [64]byte
	for _, it := range items {
		b, err := encodeMemo(it.res)
		if err != nil {
			return fmt.Errorf("save memo file: encode: %w", err)
		}
		hex.Encode(hexd[:], it.d[:])
		w.Write(hexd[:])
		w.WriteByte(' ')
		w.Write(b)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("save memo file %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("save memo file %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save memo file %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("save memo file: %w", err)
	}
	return nil
}

// closePersist stops the saver after a last save.
func (k *Keyer) closePersist() {
	p := k.persist
	if p == nil {
		return
	}
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
}

// MemoFileStats returns the memo file's counters; zero without one.
func (k *Keyer) MemoFileStats() MemoFileStats {
	st := k.fileStats
	if p := k.persist; p != nil {
		st.Saves, st.Failures = p.saves.Load(), p.failures.Load()
	}
	return st
}
