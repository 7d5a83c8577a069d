package bench

import (
	"bufio"
	"errors"
	"io"
	"net"
	"time"
)

// lineConn is a peer's connection, buffered both ways, whose replies come a CRLF-ended line
// at a time, values announced by a line following it: what Redis's RESP and memcached's
// text protocol share.
type lineConn struct {
	c     net.Conn
	br    *bufio.Reader
	bw    *bufio.Writer
	proto string // names the protocol in errors
}

func dialLine(addr, proto string) (lineConn, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return lineConn{}, err
	}
	return lineConn{c: c, br: bufio.NewReaderSize(c, 256<<10), bw: bufio.NewWriterSize(c, 64<<10), proto: proto}, nil
}

func (l *lineConn) Close() error { return l.c.Close() }

// line reads a reply line, not empty, and returns it without its CRLF; the slice is only
// valid until the next read.
func (l *lineConn) line() ([]byte, error) {
	b, err := l.br.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(b) < 3 || b[len(b)-2] != '\r' {
		return nil, errors.New(l.proto + ": malformed reply line")
	}
	return b[:len(b)-2], nil
}

// value reads the size bytes of a value and the CRLF after them, and hands the value to fn;
// the slice is only valid during the call.
func (l *lineConn) value(size int, fn func(v []byte)) error {
	if b, err := l.br.Peek(size + 2); err == nil {
		fn(b[:size])
		_, err = l.br.Discard(len(b))
		return err
	}
	// Larger than the buffer (or cut short: then ReadFull fails too).
	b := make([]byte, size+2)
	if _, err := io.ReadFull(l.br, b); err != nil {
		return err
	}
	fn(b[:size])
	return nil
}
