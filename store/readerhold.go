package store

import "sync"

// readerHolds keeps the chunks of blobs that readers are streaming from
// being deleted under them. A reader reads each chunk after its first in a
// transaction of its own (get.go, blobReader), so a Delete that commits
// meanwhile would leave it nothing to read; instead the purge of a held
// upload's chunks waits for the last reader to close (purgeChunks,
// blobReader.Close). The blob's record goes at once, so the entry is gone
// for everyone else; only the chunks being read stay, until the readers
// finish. The maps hold one element per upload that an open reader reads:
// bounded by the open readers.
type readerHolds struct {
	mu       sync.Mutex
	held     map[uploadID]int
	deferred map[uploadID]deferredPurge
}

// deferredPurge is a purgeChunks call waiting for readers to close.
type deferredPurge struct {
	n    uint32
	size int64
}

// hold marks u as read by one more reader.
func (h *readerHolds) hold(u uploadID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = make(map[uploadID]int)
	}
	h.held[u]++
}

// release undoes hold and returns the purge of u's chunks to run now, when
// this was the last reader and a purge was deferred.
func (h *readerHolds) release(u uploadID) (deferredPurge, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held[u]--; h.held[u] > 0 {
		return deferredPurge{}, false
	}
	delete(h.held, u)
	p, ok := h.deferred[u]
	delete(h.deferred, u)
	return p, ok
}

// deferPurge keeps the purge of u's n chunks (size bytes) for the last
// reader's release when a reader holds u, and reports whether it did.
func (h *readerHolds) deferPurge(u uploadID, n uint32, size int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held[u] == 0 {
		return false
	}
	if h.deferred == nil {
		h.deferred = make(map[uploadID]deferredPurge)
	}
	h.deferred[u] = deferredPurge{n: n, size: size}
	return true
}
