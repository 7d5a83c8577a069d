package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/portmux"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
)

func (s *Server) handleConn(c net.Conn, sl *slot) {
	br := bufio.NewReaderSize(c, connReadBuffer)
	// A peer that connects and stays silent must not hold a connection
	// slot forever; after sniffing, the protocols manage their own time.
	_ = c.SetReadDeadline(time.Now().Add(s.opts.HeaderTimeout))
	head, err := br.Peek(4)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		s.closedConn(c, err, "silent")
		s.untrack(c)
		c.Close()
		return
	}
	sl.setBusy()
	if string(head) == proto.Magic {
		defer s.untrack(c)
		defer c.Close()
		s.serveRPC(c, br, sl)
		return
	}
	// HTTP: the http.Server owns the connection from here (httpConnState
	// keeps its slot idle or busy); untrack on Close.
	s.mu.Lock()
	if cur, ok := s.conns[c]; ok {
		cur.http = true
	}
	s.mu.Unlock()
	s.httpLn.Push(&portmux.Conn{Conn: c, R: br, OnClose: func() { s.untrack(c) }})
}

// serveRPC answers frames in order until the peer closes, stays idle longer
// than IdleTimeout, takes longer than ReadTimeout to send a frame it started,
// does not take a response within WriteTimeout, or sends a frame it cannot
// parse; each of these closes this connection only. Responses are flushed
// when no further request is already buffered, so pipelined requests share a
// write.
func (s *Server) serveRPC(c net.Conn, br *bufio.Reader, sl *slot) {
	var (
		bw       *bufio.Writer // made on the first pipelined response
		f        proto.Frame
		buf      []byte
		reserved int64 // bytes of buf's capacity taken from s.inflight
		err      error
		keys     []uint64 // taken from the kept sets at the first request (warm.go)
		out      []byte
	)
	defer func() { s.inflight.give(reserved) }()
	defer func() {
		if out != nil || keys != nil {
			s.keepBuffers(&connBuffers{out: out, keys: keys})
		}
	}()
	grow := func(newCap int) error {
		need := max(0, int64(newCap)-FreeFrameBytes) - reserved
		if need <= 0 {
			return nil
		}
		if !s.inflight.take(need) {
			return errInflight
		}
		reserved += need
		return nil
	}
	for {
		if err := s.awaitFrame(c, br, sl); err != nil {
			s.closedConn(c, err, "idle")
			return
		}
		s.setReadDeadline(c, s.opts.ReadTimeout)
		buf, err = proto.ReadFrameFunc(br, buf, s.opts.MaxFrameSize, &f, grow)
		if err != nil {
			s.closedConn(c, err, "slow_frame")
			return
		}
		if out == nil && keys == nil {
			nb := s.buffers() // a set kept by another connection, or a new one
			out, keys = nb.out, nb.keys
		}
		out, keys = s.handleRPC(out[:0], &f, keys)
		_ = c.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		if br.Buffered() == 0 && (bw == nil || bw.Buffered() == 0) {
			// Nothing else queued: write the response without copying it.
			if _, err := c.Write(out); err != nil {
				s.closedConn(c, err, "slow_write")
				return
			}
		} else {
			if bw == nil {
				bw = bufio.NewWriterSize(c, 64<<10)
			}
			if _, err := bw.Write(out); err != nil {
				s.closedConn(c, err, "slow_write")
				return
			}
			if br.Buffered() == 0 {
				if err := bw.Flush(); err != nil {
					s.closedConn(c, err, "slow_write")
					return
				}
			}
		}
		// Keep small buffers for the next request; give large ones back: an
		// idle connection holds no more than it is allowed without counting.
		if cap(buf) > FreeFrameBytes {
			buf = nil
			s.inflight.give(reserved)
			reserved = 0
		}
		if 8*cap(keys)+cap(out) > FreeReplyBytes {
			s.keepBuffers(&connBuffers{out: out, keys: keys})
			out, keys = nil, nil
		}
	}
}

// awaitFrame waits up to IdleTimeout for the first byte of the next frame,
// the connection idle meanwhile.
func (s *Server) awaitFrame(c net.Conn, br *bufio.Reader, sl *slot) error {
	if br.Buffered() > 0 {
		return nil
	}
	sl.setIdle()
	s.setReadDeadline(c, s.opts.IdleTimeout)
	_, err := br.Peek(1)
	sl.setBusy()
	return err
}

// setReadDeadline sets c's read deadline d from now, unless Shutdown has
// begun: it expires the deadlines of baidu_std connections once, and one set
// after that would undo it. Frames already buffered are still answered.
func (s *Server) setReadDeadline(c net.Conn, d time.Duration) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	if s.stopping.Load() {
		_ = c.SetReadDeadline(time.Now())
	}
}

var errInflight = errors.New("baidu_std: frame bodies in flight exceed --max-inflight-bytes")

// closedConn counts and logs why a connection is closed; a clean close by
// the peer or by Shutdown is not counted. timeoutReason names a deadline
// that expired.
func (s *Server) closedConn(c net.Conn, err error, timeoutReason string) {
	reason := ""
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || s.stopping.Load():
		return
	case errors.Is(err, errInflight):
		reason = "memory"
	case errors.As(err, &ne) && ne.Timeout():
		reason = timeoutReason
	case timeoutReason == "slow_frame":
		s.m.badFrames.Inc()
		reason = "bad_frame"
	default:
		reason = "error"
	}
	s.m.closedConns.WithLabelValues(reason).Inc()
	s.log.Debug("closing connection", "remote", c.RemoteAddr().String(), "reason", reason, "err", err)
}

// byteBudget is a counter of bytes taken from a fixed allowance; take never
// blocks, so a full budget refuses at once instead of stalling a reader.
type byteBudget struct {
	used atomic.Int64
	max  int64
}

func (b *byteBudget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (b *byteBudget) give(n int64) {
	if n > 0 {
		b.used.Add(-n)
	}
}
