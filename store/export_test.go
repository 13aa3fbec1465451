package store

import "time"

// ExpirePass runs one expiry pass as of now and returns how many entries it
// removed, for tests that open the store with a negative ExpiryInterval.
func (s *Badger) ExpirePass(now time.Time) int64 {
	r := s.expirePass(now)
	return r.total()
}

// ExpirePassResult is ExpirePass that also reports whether the pass left a
// backlog (the loop then runs another at once).
func (s *Badger) ExpirePassResult(now time.Time) (removed int64, more bool) {
	r := s.expirePass(now)
	return r.total(), r.more
}
