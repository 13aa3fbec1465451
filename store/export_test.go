package store

import "time"

// ExpirePass runs one expiry pass as of now and returns how many entries it
// removed, for tests that open the store with a negative ExpiryInterval.
func (s *Badger) ExpirePass(now time.Time) int64 {
	r := s.expirePass(now)
	return r.total()
}
