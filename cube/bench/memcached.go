package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/internal/loopback"
)

// memcachedConn is a minimal client of memcached's text protocol: enough for
// a multi-get ("get k1 k2 ..."), pipelined "set ... noreply" and "version".
type memcachedConn struct {
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
}

func dialMemcached(addr string) (*memcachedConn, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	return &memcachedConn{c: c, br: bufio.NewReaderSize(c, 256<<10), bw: bufio.NewWriterSize(c, 64<<10)}, nil
}

func (m *memcachedConn) Close() error { return m.c.Close() }

func (m *memcachedConn) line() ([]byte, error) {
	l, err := m.br.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(l) < 2 || l[len(l)-2] != '\r' {
		return nil, errors.New("memcached: malformed reply line")
	}
	return l[:len(l)-2], nil
}

// version sends "version" and waits for its answer: after pipelined
// noreply commands, it tells that the server has read them all.
func (m *memcachedConn) version() error {
	_, _ = m.bw.WriteString("version\r\n")
	if err := m.bw.Flush(); err != nil {
		return err
	}
	l, err := m.line()
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(l, []byte("VERSION ")) {
		return fmt.Errorf("memcached: version replied %q", l)
	}
	return nil
}

// set queues one "set" without a reply (flushed by the caller).
func (m *memcachedConn) set(k uint64, v []byte) {
	var kb [20]byte
	_, _ = m.bw.WriteString("set ")
	_, _ = m.bw.Write(redisKey(kb[:0], k))
	_, _ = m.bw.WriteString(" 0 0 ")
	_, _ = m.bw.Write(strconv.AppendInt(kb[:0], int64(len(v)), 10))
	_, _ = m.bw.WriteString(" noreply\r\n")
	_, _ = m.bw.Write(v)
	_, _ = m.bw.WriteString("\r\n")
}

// mget asks for keys in one "get" and calls fn for every value, in the
// order of keys, nil for a miss (memcached leaves misses out of its answer;
// the keys it names tell which is which). The slice is only valid during
// the call.
func (m *memcachedConn) mget(keys []uint64, fn func(i int, v []byte)) error {
	_, _ = m.bw.WriteString("get")
	var kb [21]byte
	for _, k := range keys {
		kb[0] = ' '
		_, _ = m.bw.Write(redisKey(kb[:1], k))
	}
	_, _ = m.bw.WriteString("\r\n")
	if err := m.bw.Flush(); err != nil {
		return err
	}
	i := 0
	for {
		l, err := m.line()
		if err != nil {
			return err
		}
		if string(l) == "END" {
			break
		}
		k, sz, ok := parseValueLine(l)
		if !ok {
			return fmt.Errorf("memcached: bad reply line %q", l)
		}
		for i < len(keys) && keys[i] != k {
			fn(i, nil)
			i++
		}
		if i == len(keys) {
			return fmt.Errorf("memcached: answered key %d, not asked for at this point", k)
		}
		b, err := m.br.Peek(sz + 2)
		if err != nil {
			buf := make([]byte, sz+2)
			if _, err := io.ReadFull(m.br, buf); err != nil {
				return err
			}
			b = buf
		}
		fn(i, b[:sz])
		i++
		_, _ = m.br.Discard(len(b))
	}
	for ; i < len(keys); i++ {
		fn(i, nil)
	}
	return nil
}

// parseValueLine parses "VALUE <key> <flags> <bytes>" (keys are decimal
// here) without allocating: the load generator's cost per value must not
// handicap a peer.
func parseValueLine(l []byte) (key uint64, size int, ok bool) {
	rest, ok := bytes.CutPrefix(l, []byte("VALUE "))
	if !ok {
		return 0, 0, false
	}
	field := func() []byte {
		f, r, _ := bytes.Cut(rest, []byte{' '})
		rest = r
		return f
	}
	kf, _, sf := field(), field(), field()
	if len(kf) == 0 || len(kf) > 20 {
		return 0, 0, false
	}
	for _, c := range kf {
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		key = key*10 + uint64(c-'0')
	}
	size, err := atoi(sf)
	return key, size, err == nil && size >= 0
}

// loadMemcached writes every key with pipelined noreply sets, then waits
// for a "version" answer.
func loadMemcached(addr string, o Options) error {
	c, err := dialMemcached(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, o.ValueSize)
	for k := 0; k < o.Keys; k++ {
		c.set(uint64(k), value(buf, uint64(k)))
		if k%10_000 == 9_999 {
			if err := c.version(); err != nil {
				return err
			}
		}
	}
	return c.version()
}

// memcachedMemoryMB is the cache size (-m) that holds every key with room
// to spare: memcached evicts beyond it, and an evicted key would miss.
func memcachedMemoryMB(o Options) int {
	perItem := 64 + 20 + o.ValueSize // item header, key, value, slab rounding
	return max(64, 2*o.Keys*perItem>>20)
}

func startMemcached(ctx context.Context, o Options, cpus int) (*proc, error) {
	port, err := loopback.Port()
	if err != nil {
		return nil, err
	}
	argv := pinned(o.ServerCPUs, o.MemcachedServer,
		"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0",
		"-t", strconv.Itoa(memcachedThreads(cpus)), "-m", strconv.Itoa(memcachedMemoryMB(o)), "-c", "1024")
	if os.Geteuid() == 0 {
		argv = append(argv, "-u", "nobody") // memcached refuses to run as root
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", o.MemcachedServer, err)
	}
	p := &proc{cmd: cmd, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c, err := dialMemcached(p.addr)
		if err != nil {
			continue
		}
		err = c.version()
		c.Close()
		if err == nil {
			return p, nil
		}
	}
	p.stop()
	return nil, errors.New("memcached did not answer \"version\" within 20s")
}
