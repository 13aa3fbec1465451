package api

import "time"

// SetOutageLogEvery sets how often a request line of each outage code is
// logged at WARN at most (outagelog.go), so that tests need not wait it out.
func (s *Server) SetOutageLogEvery(d time.Duration) {
	s.outages.mu.Lock()
	defer s.outages.mu.Unlock()
	s.outages.every = d
}
