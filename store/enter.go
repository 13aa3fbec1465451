package store

import "fmt"

// enter starts a short operation on the database; leave ends it.
func (s *Badger) enter() error {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (s *Badger) leave() { s.closeMu.RUnlock() }

// enterWrite starts a short operation that writes to the database;
// leaveWrite ends it. Writes are paused while value-log GC runs (see runGC).
// While the directory is gone or not writable it fails with DirErr's error
// (ErrDirUnavailable): Badger must not be handed the write (writable).
func (s *Badger) enterWrite() error {
	if err := s.enter(); err != nil {
		return err
	}
	if err := s.writable(); err != nil { // dirhealth.go
		s.leave()
		return fmt.Errorf("%w; nothing was changed: make the directory writable again and writes resume, or restart the server on a directory it can write", err)
	}
	s.gcMu.RLock()
	return nil
}

func (s *Badger) leaveWrite() {
	s.gcMu.RUnlock()
	s.leave()
}
