package store

import "github.com/dgraph-io/badger/v4"

// chunkPipeline is how many chunk buffers one upload fills and commits in
// turn: while up to chunkPipeline-1 of its chunks wait for or sit in
// Badger's single value-log writer, the request reads and hashes the next.
// With two (one commit in flight) a stream's next chunk waited for the
// writer to finish the other streams' chunks queued before its own. It
// costs chunkPipeline × (4+ChunkSize) bytes of buffers per large upload in
// progress (api.Limits.MaxConcurrentUploads bounds how many), taken from
// the store's pool as the upload needs them.
const chunkPipeline = 3

// chunkWriter commits an upload's chunks, each in its own transaction (a
// Badger transaction is bounded in size), up to chunkPipeline-1 commits in
// flight while the next chunk is read and hashed into a free buffer.
type chunkWriter struct {
	s     *Badger
	u     uploadID
	slots []chunkSlot // a ring of chunkPipeline buffers
	cur   int         // the slot buf fills
	err   error       // the first failed commit's error
	n     uint32      // chunks handed to Badger
	bytes int64       // their data bytes, not yet settled (diskbound.go)
	// written is every data byte handed to Badger, settled or not: what
	// purging the chunks frees.
	written int64
}

// chunkSlot is one buffer of the ring and the commit that holds it.
type chunkSlot struct {
	buf  []byte
	done chan error // receives the commit's result; one per slot, reused
	busy bool       // a commit of buf is in flight
}

// buf returns the buffer to fill next (4 bytes of checksum, then data),
// after the commit that last used it finished.
func (w *chunkWriter) buf() []byte {
	if w.slots == nil {
		w.slots = make([]chunkSlot, chunkPipeline)
	}
	sl := &w.slots[w.cur]
	w.settle(sl)
	if sl.buf == nil {
		sl.buf = w.s.getBuf()
	}
	return sl.buf
}

// settle waits for the commit holding sl, if any, and keeps its error.
func (w *chunkWriter) settle(sl *chunkSlot) {
	if !sl.busy {
		return
	}
	if err := <-sl.done; err != nil && w.err == nil {
		w.err = err
	}
	sl.busy = false
}

// write starts committing buf()[:4+n] as the next chunk and moves to the
// next buffer. It fails, and commits nothing more, once a commit has failed.
func (w *chunkWriter) write(n int) error {
	if w.err != nil {
		return w.err
	}
	if err := w.s.checkDiskFree(int64(4 + n)); err != nil { // diskfree.go
		return err
	}
	if err := w.s.enterWrite(); err != nil {
		return err
	}
	sl := &w.slots[w.cur]
	txn := w.s.db.NewTransaction(true)
	if err := txn.Set(chunkKey(w.u, w.n), sl.buf[:4+n]); err != nil {
		txn.Discard()
		w.s.leaveWrite()
		return err
	}
	if sl.done == nil {
		sl.done = make(chan error, 1)
	}
	sl.busy = true
	w.n++
	w.bytes += int64(n)
	w.written += int64(n)
	w.s.diskWrote(int64(n), true)
	w.cur = (w.cur + 1) % len(w.slots)
	done := sl.done
	commit := w.s.commitChunk
	if commit == nil {
		commit = (*badger.Txn).CommitWith
	}
	commit(txn, func(err error) {
		w.s.leaveWrite()
		done <- err
	})
	return nil
}

// wait waits for every commit in flight; it returns the first error.
func (w *chunkWriter) wait() error {
	for i := range w.slots {
		w.settle(&w.slots[i])
	}
	return w.err
}

// close waits for the commits in flight and returns the buffers.
func (w *chunkWriter) close() error {
	err := w.wait()
	for i := range w.slots {
		if b := w.slots[i].buf; b != nil {
			w.s.putBuf(b)
			w.slots[i].buf = nil
		}
	}
	return err
}
