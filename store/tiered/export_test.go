package tiered

import "time"

// Idle waits until no download or fill is in flight, so that tests see the
// hot tier filled.
func (s *Store) Idle() {
	for {
		s.mu.Lock()
		n := len(s.spools)
		s.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
