package keying

import "container/list"

// lru is a fixed-capacity least-recently-used map. Not safe for concurrent
// use: the Keyer's mutex owns it.
type lru[K comparable, V any] struct {
	max   int
	order *list.List // front = most recent; values are *lruEntry
	items map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key K
	val V
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, order: list.New(), items: make(map[K]*list.Element, max)}
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
	if e, ok := l.items[k]; ok {
		e.Value.(*lruEntry[K, V]).val = v
		l.order.MoveToFront(e)
		return
	}
	l.items[k] = l.order.PushFront(&lruEntry[K, V]{key: k, val: v})
	for l.order.Len() > l.max {
		last := l.order.Back()
		l.order.Remove(last)
		delete(l.items, last.Value.(*lruEntry[K, V]).key)
	}
}

func (l *lru[K, V]) remove(k K) {
	if e, ok := l.items[k]; ok {
		l.order.Remove(e)
		delete(l.items, k)
	}
}

func (l *lru[K, V]) len() int { return l.order.Len() }
