package keying

import "container/list"

// lru is a least-recently-used map bounded in entries and, when sizeOf is
// set, in total bytes. Not safe for concurrent use: the Keyer's mutex owns
// it.
type lru[K comparable, V any] struct {
	max      int
	maxBytes int64
	bytes    int64
	sizeOf   func(V) int64 // nil: entries only
	order    *list.List    // front = most recent; values are *lruEntry
	items    map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key  K
	val  V
	size int64
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, order: list.New(), items: make(map[K]*list.Element)}
}

func (l *lru[K, V]) get(k K) (V, bool) {
	e, ok := l.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	l.order.MoveToFront(e)
	return e.Value.(*lruEntry[K, V]).val, true
}

func (l *lru[K, V]) put(k K, v V) {
	var size int64
	if l.sizeOf != nil {
		size = l.sizeOf(v)
	}
	if e, ok := l.items[k]; ok {
		ent := e.Value.(*lruEntry[K, V])
		l.bytes += size - ent.size
		ent.val, ent.size = v, size
		l.order.MoveToFront(e)
	} else {
		l.items[k] = l.order.PushFront(&lruEntry[K, V]{key: k, val: v, size: size})
		l.bytes += size
	}
	for l.order.Len() > l.max || (l.maxBytes > 0 && l.bytes > l.maxBytes && l.order.Len() > 1) {
		l.removeElement(l.order.Back())
	}
}

func (l *lru[K, V]) remove(k K) {
	if e, ok := l.items[k]; ok {
		l.removeElement(e)
	}
}

func (l *lru[K, V]) removeElement(e *list.Element) {
	ent := e.Value.(*lruEntry[K, V])
	l.order.Remove(e)
	delete(l.items, ent.key)
	l.bytes -= ent.size
}

func (l *lru[K, V]) len() int { return l.order.Len() }

// oldestFirst calls f for every entry from the least to the most recently
// used, so that putting them back in this order restores the order.
func (l *lru[K, V]) oldestFirst(f func(K, V)) {
	for e := l.order.Back(); e != nil; e = e.Prev() {
		ent := e.Value.(*lruEntry[K, V])
		f(ent.key, ent.val)
	}
}

// peek returns the value of k without making it the most recent.
func (l *lru[K, V]) peek(k K) (V, bool) {
	e, ok := l.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	return e.Value.(*lruEntry[K, V]).val, true
}
