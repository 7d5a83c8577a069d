// Package portmux serves two protocols on one port, as brpc does: the accept loop sniffs the
// first bytes of each connection, keeps the binary protocol's connections and hands the rest
// to an http.Server through a Listener, each connection replaying the bytes read while
// sniffing.
package portmux

import (
	"bufio"
	"net"
	"sync"
)

// Conn is a connection whose first bytes were read into R while sniffing: reads replay them.
type Conn struct {
	net.Conn
	R *bufio.Reader
	// OnClose, if set, runs once, at the first Close.
	OnClose func()
	once    sync.Once
}

func (c *Conn) Read(p []byte) (int, error) { return c.R.Read(p) }

// Close closes the connection, after OnClose.
func (c *Conn) Close() error {
	c.once.Do(func() {
		if c.OnClose != nil {
			c.OnClose()
		}
	})
	return c.Conn.Close()
}

// Listener is a net.Listener fed by the sniffing accept loop (Push).
type Listener struct {
	ch     chan net.Conn
	done   chan struct{}
	closed sync.Once
}

// NewListener is a Listener with no connection yet.
func NewListener() *Listener {
	return &Listener{ch: make(chan net.Conn), done: make(chan struct{})}
}

// Push hands a connection to the next Accept; once the Listener is closed it closes c.
func (l *Listener) Push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

// Accept returns the next pushed connection, or net.ErrClosed once closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close makes Accept return net.ErrClosed and Push close what it is given.
func (l *Listener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return nil
}

// Addr is a placeholder: the real address is the sniffing listener's.
func (l *Listener) Addr() net.Addr { return &net.TCPAddr{} }
