package stats

import "container/heap"

// runLRU orders the run table's slots for eviction: per namespace, a
// min-heap of its slots by when each was last seen (ties: admitted first).
// It is plain bookkeeping, not safe for concurrent use: runTable.mu owns
// it.
//
// A request that finds its run's slot stores the time in runSlot.last
// without any lock, so the heaps cannot follow every touch. Each slot keeps
// the time the heap placed it by (runSlot.key, its last then); victim
// moves a namespace's top whose last has changed since to its place, until
// the top is in place: every other slot was seen at or after its key, so
// that top is the least recently seen. A touch costs nothing, an eviction O(log n) per slot moved
// (each moved once per touch at most) plus one look at each namespace's
// top: O(namespaces) more, and those are bounded (Config.MaxNamespaces).
// Before, each eviction scanned every slot: ~100 µs at 500 runs, under the
// lock that admits new runs.
type runLRU struct {
	byNS map[string]*runHeap
}

// runHeap is one namespace's slots, the least recently seen on top.
type runHeap []*runSlot

func (h runHeap) Len() int { return len(h) }
func (h runHeap) Less(i, j int) bool {
	return h[i].key < h[j].key || h[i].key == h[j].key && h[i].seq < h[j].seq
}
func (h runHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *runHeap) Push(x any) {
	sl := x.(*runSlot)
	sl.idx = len(*h)
	*h = append(*h, sl)
}
func (h *runHeap) Pop() any {
	old := *h
	sl := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	sl.idx = -1
	return sl
}

// top returns the least recently seen slot of h, first moving down each top
// that was seen since the heap placed it.
func (h *runHeap) top() *runSlot {
	for {
		sl := (*h)[0]
		last := sl.last.Load()
		if last == sl.key {
			return sl
		}
		sl.key = last
		heap.Fix(h, 0)
	}
}

func newRunLRU() runLRU { return runLRU{byNS: make(map[string]*runHeap)} }

// add places sl, admitted in namespace sl.ns.
func (l *runLRU) add(sl *runSlot) {
	h := l.byNS[sl.ns]
	if h == nil {
		h = &runHeap{}
		l.byNS[sl.ns] = h
	}
	sl.key = sl.last.Load()
	heap.Push(h, sl)
}

// remove takes sl out.
func (l *runLRU) remove(sl *runSlot) {
	h := l.byNS[sl.ns]
	heap.Remove(h, sl.idx)
	if h.Len() == 0 {
		delete(l.byNS, sl.ns)
	}
}

// victim returns the least recently seen slot of the namespace holding the
// most (ties: the namespace whose least recently seen is older), nil when
// there is none.
func (l *runLRU) victim() *runSlot {
	var v *runSlot
	vn := 0
	for _, h := range l.byNS {
		sl, n := h.top(), h.Len()
		if v == nil || n > vn || n == vn && (sl.key < v.key || sl.key == v.key && sl.seq < v.seq) {
			v, vn = sl, n
		}
	}
	return v
}
