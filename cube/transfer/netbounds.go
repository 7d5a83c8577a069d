package transfer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// newHTTPClient is the one client every outgoing request of the transfer
// uses (donefile, input mirror, agents), so that every one of them is
// bounded the same way: connecting within connect, a response header within
// header, and no more than idle without a byte moving on the connection. The
// idle bound is what stops a server that trickles one byte a minute: a total
// deadline alone would let it hold the transfer for as long as the deadline
// (callers add one too: --donefile-timeout, --input-timeout, --step-timeout).
func newHTTPClient(connect, header, idle time.Duration) *http.Client {
	d := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &idleConn{Conn: c, idle: idle}, nil
		},
		TLSHandshakeTimeout:   connect,
		ResponseHeaderTimeout: header,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   8,
	}
	return &http.Client{Transport: tr}
}

// idleConn moves each read's and write's deadline idle into the future, so
// a connection that carries nothing for that long fails with an error that
// names the bound.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	_ = c.SetReadDeadline(time.Now().Add(c.idle)) // a closed conn reports it on Read
	n, err := c.Conn.Read(p)
	return n, c.named(err)
}

func (c *idleConn) Write(p []byte) (int, error) {
	_ = c.SetWriteDeadline(time.Now().Add(c.idle))
	n, err := c.Conn.Write(p)
	return n, c.named(err)
}

func (c *idleConn) named(err error) error {
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() {
		return &idleError{err: err, idle: c.idle}
	}
	return err
}

// idleError is a net.Error (Timeout) so that net/http treats it as the
// timeout it is.
type idleError struct {
	err  error
	idle time.Duration
}

func (e *idleError) Error() string {
	return fmt.Sprintf("nothing received or sent for %s (--read-idle-timeout): %v", e.idle, e.err)
}
func (e *idleError) Unwrap() error   { return e.err }
func (e *idleError) Timeout() bool   { return true }
func (e *idleError) Temporary() bool { return true }
