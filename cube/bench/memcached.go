package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// memcachedConn is a minimal client of memcached's text protocol: enough for
// a multi-get ("get k1 k2 ..."), pipelined "set ... noreply" and "version".
type memcachedConn struct{ lineConn }

func dialMemcached(addr string) (*memcachedConn, error) {
	c, err := dialLine(addr, "memcached")
	if err != nil {
		return nil, err
	}
	return &memcachedConn{c}, nil
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
		if err := m.value(sz, func(v []byte) { fn(i, v) }); err != nil {
			return err
		}
		i++
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

// load writes every key with pipelined noreply sets, then waits for a "version" answer.
func (m *memcachedConn) load(o Options) error {
	buf := make([]byte, o.ValueSize)
	for k := 0; k < o.Keys; k++ {
		m.set(uint64(k), value(buf, uint64(k)))
		if k%10_000 == 9_999 {
			if err := m.version(); err != nil {
				return err
			}
		}
	}
	return m.version()
}

// memcachedMemoryMB is the cache size (-m) that holds every key with room
// to spare: memcached evicts beyond it, and an evicted key would miss.
func memcachedMemoryMB(o Options) int {
	perItem := 64 + 20 + o.ValueSize // item header, key, value, slab rounding
	return max(64, 2*o.Keys*perItem>>20)
}

// memcachedServer runs Debian's memcached with one worker thread per core of cpus, and
// memory for every key.
func memcachedServer(o Options, cpus int) peerServer[*memcachedConn] {
	return peerServer[*memcachedConn]{
		system: "memcached (get)",
		exe:    o.MemcachedServer,
		argv: func(port string) []string {
			argv := pinned(o.ServerCPUs, o.MemcachedServer,
				"-l", "127.0.0.1", "-p", port, "-U", "0",
				"-t", strconv.Itoa(memcachedThreads(cpus)), "-m", strconv.Itoa(memcachedMemoryMB(o)), "-c", "1024")
			if os.Geteuid() == 0 {
				argv = append(argv, "-u", "nobody") // memcached refuses to run as root
			}
			return argv
		},
		dial:    dialMemcached,
		request: `"version"`,
		ready:   (*memcachedConn).version,
		load:    func(c *memcachedConn) error { return c.load(o) },
		about: func() string {
			return fmt.Sprintf("memcached: %s, -t %d (one worker thread per core, as its manual advises), -m %d",
				programVersion(o.MemcachedServer, "-V"), memcachedThreads(cpus), memcachedMemoryMB(o))
		},
	}
}
