package server

import "time"

// A dictionary is checked against its checksums when it is opened, and served from then on
// as it is in memory or in its file mapping. What changes afterwards (a file edited in place,
// a bit flipped on disk or in memory) would be served as it is. So the server checks the
// version it serves again every Options.ScrubInterval (a whole pass: CRC32C, about a second
// per 3 GB on one core), and retires one that no longer matches, as it retires one whose
// mapping faults (lookup.go): it falls back to the newest older version that still opens, or
// to none (every key a miss, /readyz 503); the transfer's heal pass then prepares the decided
// version afresh and switches the replica back to it.

// DefaultScrubInterval is the scrub's period of the cube server command.
const DefaultScrubInterval = 15 * time.Minute

// scrubLoop scrubs every interval until the server shuts down.
func (s *Server) scrubLoop(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			_ = s.scrub()
		}
	}
}

// scrub checks the served version against its checksums, retiring it if it no longer
// matches; it returns what it found wrong.
func (s *Server) scrub() error {
	v := s.store.acquire()
	if v == nil {
		return nil
	}
	defer v.release()
	if v == s.faulted.Load() {
		return nil
	}
	var bad error
	if err := s.readGuarded(v, func() { bad = v.d.Verify() }); err != nil {
		return err // the mapping faulted: retired by dictFaulted
	}
	if bad != nil {
		s.dictCorrupted(v, bad)
	}
	return bad
}

// verifyPending checks, in the background, the blocks of a version opened
// with dict.Options.VerifyOnTouch that no lookup has read yet, so that a
// damaged block is found before a lookup needs it; it holds a reference on
// v until done.
func (s *Server) verifyPending(v *version) {
	defer v.release()
	start := time.Now()
	var bad error
	if err := s.readGuarded(v, func() { bad = v.d.VerifyPending() }); err != nil {
		return // the mapping faulted: retired by dictFaulted
	}
	if bad != nil {
		s.dictCorrupted(v, bad)
		return
	}
	s.log.Debug("dictionary checked against its checksums", "version", v.name, "bytes", v.d.Size(), "took", time.Since(start))
}
