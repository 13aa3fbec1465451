package store

import (
	"bytes"

	"github.com/dgraph-io/badger/v4"
)

// metaPage calls visit with up to limit metadata records under prefix with
// keys after after (nil: from the first), in key order, from one snapshot;
// visit must not keep item. It returns the last key it read and whether
// more keys follow.
func (s *Badger) metaPage(prefix, after []byte, limit int, visit func(ref entryRef, item *badger.Item)) (last []byte, more bool, err error) {
	if err := s.enter(); err != nil {
		return nil, false, err
	}
	defer s.leave()
	err = s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: min(limit, 64)})
		defer it.Close()
		if after == nil {
			it.Rewind()
		} else {
			it.Seek(after)
			if it.Valid() && bytes.Equal(it.Item().Key(), after) {
				it.Next()
			}
		}
		for n := 0; it.Valid(); it.Next() {
			if n == limit {
				more = true
				break
			}
			n++
			item := it.Item()
			last = item.KeyCopy(last[:0])
			if ref, ok := parseEntryKey(item.Key()); ok {
				visit(ref, item)
			}
		}
		return nil
	})
	return last, more, err
}
