package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// redisConn is a minimal RESP client: enough for PING, MSET and MGET.
type redisConn struct {
	c   net.Conn
	br  *bufio.Reader
	bw  *bufio.Writer
	num []byte
}

func dialRedis(addr string) (*redisConn, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	return &redisConn{c: c, br: bufio.NewReaderSize(c, 256<<10), bw: bufio.NewWriterSize(c, 64<<10)}, nil
}

func (r *redisConn) Close() error { return r.c.Close() }

// The write helpers ignore errors: bufio.Writer errors are sticky, and the
// Flush that ends every command reports them.

func (r *redisConn) writeArrayHeader(n int) {
	_ = r.bw.WriteByte('*')
	r.num = strconv.AppendInt(r.num[:0], int64(n), 10)
	_, _ = r.bw.Write(r.num)
	_, _ = r.bw.WriteString("\r\n")
}

func (r *redisConn) writeBulk(b []byte) {
	_ = r.bw.WriteByte('$')
	r.num = strconv.AppendInt(r.num[:0], int64(len(b)), 10)
	_, _ = r.bw.Write(r.num)
	_, _ = r.bw.WriteString("\r\n")
	_, _ = r.bw.Write(b)
	_, _ = r.bw.WriteString("\r\n")
}

// redisKey is the Redis key of cube key k: its decimal string.
func redisKey(dst []byte, k uint64) []byte { return strconv.AppendUint(dst, k, 10) }

func (r *redisConn) line() ([]byte, error) {
	l, err := r.br.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(l) < 3 || l[len(l)-2] != '\r' {
		return nil, errors.New("redis: malformed reply line")
	}
	return l[:len(l)-2], nil
}

func (r *redisConn) simple() error {
	l, err := r.line()
	if err != nil {
		return err
	}
	if l[0] == '-' {
		return fmt.Errorf("redis: %s", l[1:])
	}
	return nil
}

func (r *redisConn) ping() error {
	r.writeArrayHeader(1)
	r.writeBulk([]byte("PING"))
	if err := r.bw.Flush(); err != nil {
		return err
	}
	return r.simple()
}

// mset sends one MSET of keys/values without waiting for the reply.
func (r *redisConn) mset(keys []uint64, value func(uint64) []byte) {
	r.writeArrayHeader(1 + 2*len(keys))
	r.writeBulk([]byte("MSET"))
	var kb []byte
	for _, k := range keys {
		kb = redisKey(kb[:0], k)
		r.writeBulk(kb)
		r.writeBulk(value(k))
	}
}

// mget asks for keys and calls fn for every value (nil for a miss); the
// slice is only valid during the call.
func (r *redisConn) mget(keys []uint64, fn func(i int, v []byte)) error {
	r.writeArrayHeader(1 + len(keys))
	r.writeBulk([]byte("MGET"))
	var kb [20]byte
	for _, k := range keys {
		r.writeBulk(redisKey(kb[:0], k))
	}
	if err := r.bw.Flush(); err != nil {
		return err
	}
	l, err := r.line()
	if err != nil {
		return err
	}
	if l[0] != '*' {
		return fmt.Errorf("redis: MGET replied %q", l)
	}
	n, err := atoi(l[1:])
	if err != nil || n != len(keys) {
		return fmt.Errorf("redis: MGET replied %d values for %d keys", n, len(keys))
	}
	for i := 0; i < n; i++ {
		l, err := r.line()
		if err != nil {
			return err
		}
		if l[0] != '$' {
			return fmt.Errorf("redis: bad bulk header %q", l)
		}
		sz, err := atoi(l[1:])
		if err != nil {
			return err
		}
		if sz < 0 {
			fn(i, nil)
			continue
		}
		b, err := r.br.Peek(sz + 2)
		if err != nil {
			buf := make([]byte, sz+2)
			if _, err := io.ReadFull(r.br, buf); err != nil {
				return err
			}
			b = buf
		}
		fn(i, b[:sz])
		_, _ = r.br.Discard(len(b))
	}
	return nil
}

// atoi parses a RESP length without allocating.
func atoi(b []byte) (int, error) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, errors.New("redis: bad length")
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, errors.New("redis: bad length")
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}
