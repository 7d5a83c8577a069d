package bench

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
)

// redisConn is a minimal RESP client: enough for PING, MSET and MGET.
type redisConn struct {
	lineConn
	num []byte
}

func dialRedis(addr string) (*redisConn, error) {
	c, err := dialLine(addr, "redis")
	if err != nil {
		return nil, err
	}
	return &redisConn{lineConn: c}, nil
}

// redisServer runs Debian's redis-server as a cache (no persistence), with the I/O threads
// redis.conf advises for cores CPUs, its log and files in work.
func redisServer(o Options, work string, cores int) peerServer[*redisConn] {
	threads := redisIOThreads(cores)
	return peerServer[*redisConn]{
		system: "redis (MGET)",
		exe:    o.RedisServer,
		argv: func(port string) []string {
			return pinned(o.ServerCPUs, o.RedisServer,
				"--bind", "127.0.0.1", "--port", port, "--protected-mode", "yes",
				"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", work,
				"--io-threads", strconv.Itoa(threads),
				"--logfile", filepath.Join(work, "redis.log"))
		},
		dial:    dialRedis,
		request: "PING",
		ready:   (*redisConn).ping,
		load:    func(c *redisConn) error { return c.load(o) },
		about: func() string {
			return fmt.Sprintf("redis: %s, io-threads %d (redis.conf: I/O threads only from 4 cores up)", programVersion(o.RedisServer, "--version"), threads)
		},
	}
}

// load writes every key with pipelined MSETs of 1,000 keys.
func (r *redisConn) load(o Options) error {
	buf := make([]byte, o.ValueSize)
	keys := make([]uint64, 0, 1000)
	pending := 0
	flush := func() error {
		if err := r.bw.Flush(); err != nil {
			return err
		}
		for ; pending > 0; pending-- {
			if err := r.simple(); err != nil {
				return err
			}
		}
		return nil
	}
	for k := 0; k < o.Keys; k++ {
		keys = append(keys, uint64(k))
		if len(keys) == cap(keys) || k == o.Keys-1 {
			r.mset(keys, func(k uint64) []byte { return value(buf, k) })
			keys = keys[:0]
			if pending++; pending == 16 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

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
	n, err := r.header('*')
	if err != nil {
		return fmt.Errorf("MGET: %w", err)
	}
	if n != len(keys) {
		return fmt.Errorf("redis: MGET replied %d values for %d keys", n, len(keys))
	}
	for i := 0; i < n; i++ {
		sz, err := r.header('$')
		if err != nil {
			return err
		}
		if sz < 0 {
			fn(i, nil)
			continue
		}
		if err := r.value(sz, func(v []byte) { fn(i, v) }); err != nil {
			return err
		}
	}
	return nil
}

// header reads the line that starts an array ('*') or a bulk string ('$') and returns the
// length it gives (-1: a nil bulk string).
func (r *redisConn) header(kind byte) (int, error) {
	l, err := r.line()
	if err != nil {
		return 0, err
	}
	if l[0] != kind {
		return 0, fmt.Errorf("redis: replied %q, not a %c header", l, kind)
	}
	return atoi(l[1:])
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
