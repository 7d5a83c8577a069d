package server

import (
	"net"
	"sync/atomic"
	"time"
)

// Connection slots. Every connection holds one of Options.MaxConns slots,
// and one client (a remote address) at most MaxConnsPerClient of them. A
// connection that waits for its next request — or, new, for its first bytes
// — is idle; one that sends or is served a request is busy. When a new
// connection finds the server full, or its client at its share, the idle
// connection that has waited longest, of the client holding the most slots
// (of its own client, at its share), is closed to make room; only when no
// such connection is idle is the new one closed. So clients that connect
// and wait, however many, cannot lock out a client that asks (the kubelet's
// probes included), and one client cannot take the slots of the others.

// slot is a connection's place among the server's connections.
type slot struct {
	client string
	http   bool         // handed to the HTTP server
	idle   atomic.Int64 // unix nanoseconds since the connection is idle; 0 while busy
}

func (sl *slot) setIdle() { sl.idle.Store(time.Now().UnixNano()) }
func (sl *slot) setBusy() { sl.idle.Store(0) }

// clientOf is the client a connection counts against: its remote IP.
func clientOf(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// busyConns counts the connections in the middle of a request: the
// gauge cube_connections_busy.
func (s *Server) busyConns() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(s.busyLocked())
}

// busyLocked is busyConns with s.mu held.
func (s *Server) busyLocked() int {
	n := 0
	for _, sl := range s.conns {
		if sl.idle.Load() == 0 {
			n++
		}
	}
	return n
}

// admit gives c a slot, making room as described above, or returns nil
// (rejected says why: "max_conns" or "per_client"). s.mu must not be held.
func (s *Server) admit(c net.Conn) (sl *slot, rejected string) {
	client := clientOf(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, "max_conns"
	}
	switch {
	case s.perClient[client] >= s.opts.MaxConnsPerClient:
		if !s.evictIdle(client) {
			return nil, "per_client"
		}
	case len(s.conns) >= s.opts.MaxConns:
		if !s.evictIdle("") {
			return nil, "max_conns"
		}
	}
	sl = &slot{client: client}
	sl.setIdle()
	s.conns[c] = sl
	s.perClient[client]++
	s.m.conns.Inc()
	return sl, ""
}

// evictIdle closes the longest-idle connection of client, or (client "")
// of the client holding the most slots; false if there is none idle. s.mu
// is held.
func (s *Server) evictIdle(client string) bool {
	var (
		victim net.Conn
		vs     *slot
		most   int
		oldest int64
	)
	for c, sl := range s.conns {
		idle := sl.idle.Load()
		if idle == 0 || (client != "" && sl.client != client) {
			continue
		}
		n := s.perClient[sl.client]
		if victim == nil || n > most || (n == most && idle < oldest) {
			victim, vs, most, oldest = c, sl, n, idle
		}
	}
	if victim == nil {
		return false
	}
	s.forget(victim, vs)
	s.m.closedConns.WithLabelValues("evicted").Inc()
	s.log.Debug("closing an idle connection to admit a new one", "remote", victim.RemoteAddr().String(),
		"idle", time.Duration(time.Now().UnixNano()-oldest).String())
	victim.Close()
	return true
}

// forget frees c's slot; s.mu is held.
func (s *Server) forget(c net.Conn, sl *slot) {
	delete(s.conns, c)
	if s.perClient[sl.client]--; s.perClient[sl.client] <= 0 {
		delete(s.perClient, sl.client)
	}
	s.m.conns.Dec()
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl, ok := s.conns[c]; ok {
		s.forget(c, sl)
	}
}
