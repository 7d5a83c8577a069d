package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
)

// DictConf is one entry of Paddle Serving's cube.conf (a JSON array).
type DictConf struct {
	DictName      string `json:"dict_name"`
	Shard         int    `json:"shard"`
	Dup           int    `json:"dup"`            // replicas; informational, as in cube-api
	Timeout       int    `json:"timeout"`        // ms per attempt; 0 means 1,000
	Retry         int    `json:"retry"`          // extra attempts on other replicas
	BackupRequest int    `json:"backup_request"` // ms; if > 0, ask a second replica when the first is this slow
	Type          string `json:"type"`           // ipport, ipport_list, ipport_parallel
	LoadBalancer  string `json:"load_balancer"`  // parsed; replicas are used round-robin
	Nodes         []Node `json:"nodes"`
}

// Node is one entry of DictConf.Nodes.
type Node struct {
	IP         string  `json:"ip"`
	Port       flexInt `json:"port"`
	IPPortList string  `json:"ipport_list"`
}

// flexInt accepts 8027 or "8027".
type flexInt int

func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		return nil
	}
	n, err := strconv.Atoi(s)
	*f = flexInt(n)
	return err
}

// ParseConf parses a cube.conf document.
func ParseConf(b []byte) ([]DictConf, error) {
	var confs []DictConf
	if err := json.Unmarshal(b, &confs); err != nil {
		return nil, fmt.Errorf("parse cube.conf: %w", err)
	}
	for i := range confs {
		if _, err := confs[i].replicas(func(string) ([]string, error) { return []string{"checked"}, nil }); err != nil {
			return nil, err
		}
	}
	return confs, nil
}

// LoadConf reads and parses a cube.conf file.
func LoadConf(path string) ([]DictConf, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read cube.conf %q: %w", path, err)
	}
	confs, err := ParseConf(b)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", path, err)
	}
	return confs, nil
}

// Replicas returns the host:port addresses of every shard, shard by shard, resolving the
// http:// (DNS) form.
func (d *DictConf) Replicas() ([][]string, error) { return d.replicas(resolveDomain) }

// replicas checks the structure; resolve expands the http:// form. Parsing checks without
// resolving: a cube.conf of in-cluster names is valid anywhere.
func (d *DictConf) replicas(resolve func(string) ([]string, error)) ([][]string, error) {
	if d.Shard < 1 {
		return nil, fmt.Errorf("cube.conf dict %q: shard must be >= 1", d.DictName)
	}
	node := func(n Node) ([]string, error) {
		if strings.HasPrefix(n.IPPortList, "http://") {
			// brpc's domain naming service: every IPv4 address of the host, one port, re-resolved
			// by brpc every few seconds. Here it is resolved when the client is made.
			return resolve(strings.TrimPrefix(n.IPPortList, "http://"))
		}
		if n.IPPortList != "" {
			list := strings.TrimPrefix(n.IPPortList, "list://")
			var out []string
			for _, a := range strings.Split(list, ",") {
				a = strings.TrimSpace(a)
				if f := strings.Fields(a); len(f) > 0 { // "ip:port tag"
					out = append(out, f[0])
				}
			}
			if len(out) == 0 {
				return nil, fmt.Errorf("cube.conf dict %q: empty ipport_list", d.DictName)
			}
			return out, nil
		}
		if n.IP == "" || n.Port == 0 {
			return nil, fmt.Errorf("cube.conf dict %q: node needs ip and port or ipport_list", d.DictName)
		}
		return []string{fmt.Sprintf("%s:%d", n.IP, n.Port)}, nil
	}
	shards := make([][]string, d.Shard)
	switch d.Type {
	case "ipport", "ipport_list":
		if len(d.Nodes) < d.Shard {
			return nil, fmt.Errorf("cube.conf dict %q: %d nodes for %d shards", d.DictName, len(d.Nodes), d.Shard)
		}
		for i := range shards {
			r, err := node(d.Nodes[i])
			if err != nil {
				return nil, err
			}
			shards[i] = r
		}
	case "ipport_parallel":
		if len(d.Nodes) == 0 {
			return nil, fmt.Errorf("cube.conf dict %q: no nodes", d.DictName)
		}
		r, err := node(d.Nodes[0])
		if err != nil {
			return nil, err
		}
		for i := range shards {
			shards[i] = r
		}
	default:
		return nil, fmt.Errorf("cube.conf dict %q: type %q: want ipport, ipport_list or ipport_parallel", d.DictName, d.Type)
	}
	return shards, nil
}

// Result is the outcome for one key.
type Result struct {
	Status uint32 // 0 found, proto.StatusMiss missing
	Value  []byte
	Failed bool // the key's shard could not be reached (cube-api's E_SEEK_FAILED)
}

// Found reports whether the key exists.
func (r Result) Found() bool { return !r.Failed && r.Status == 0 }

// Errors returned by Client.Seek alongside partial results.
var (
	ErrSomeShardsFailed = errors.New("cube: some shards failed")
	ErrAllShardsFailed  = errors.New("cube: all shards failed")
)

// Client seeks keys across the shards of one dictionary. Safe for
// concurrent use.
type Client struct {
	conf    DictConf
	shards  [][]string
	timeout time.Duration
	backup  time.Duration
	pools   map[string]*pool
	rr      atomic.Uint64
}

// New creates a client for one dictionary of a cube.conf.
func New(conf DictConf) (*Client, error) {
	shards, err := conf.Replicas()
	if err != nil {
		return nil, err
	}
	c := &Client{conf: conf, shards: shards, timeout: time.Duration(conf.Timeout) * time.Millisecond, pools: map[string]*pool{}}
	if c.timeout <= 0 {
		c.timeout = time.Second
	}
	c.backup = time.Duration(conf.BackupRequest) * time.Millisecond
	for _, rs := range shards {
		for _, a := range rs {
			if c.pools[a] == nil {
				c.pools[a] = &pool{addr: a, idle: make(chan *Conn, 64)}
			}
		}
	}
	return c, nil
}

// Close closes idle connections.
func (c *Client) Close() {
	for _, p := range c.pools {
		p.close()
	}
}

// Seek looks keys up: keys are split by key % shard, every shard is asked in
// parallel, and results come back in request order. A failed shard is
// retried on its other replicas (conf.Retry extra attempts); if it still
// fails its keys are marked Failed and the error says so. The version is the
// greatest version string any shard reported, as in cube-api.
func (c *Client) Seek(ctx context.Context, keys []uint64) ([]Result, string, error) {
	results, answers, err := c.SeekShards(ctx, keys)
	version := ""
	for _, a := range answers {
		version = max(version, a.Version)
	}
	return results, version, err
}

// ShardAnswer says how one shard answered a SeekShards call.
type ShardAnswer struct {
	Shard   int
	Replica string // the replica that answered; "" if every attempt failed
	Version string // the version it answered from
	Err     error
}

// SeekShards is Seek that also reports, per shard asked, which replica
// answered and from which version: what a caller needs to see versions mix
// across shards or a shard's replicas disagree. It fans out exactly as
// Paddle's cube-api does: one request per shard, replicas in turn, no
// version checks.
func (c *Client) SeekShards(ctx context.Context, keys []uint64) ([]Result, []ShardAnswer, error) {
	n := uint64(len(c.shards))
	perShard := make([][]uint64, n)
	pos := make([][]int, n)
	for i, k := range keys {
		s := k % n
		perShard[s] = append(perShard[s], k)
		pos[s] = append(pos[s], i)
	}
	results := make([]Result, len(keys))
	var answers []ShardAnswer
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failed   int
		firstErr error
	)
	for s := range perShard {
		if len(perShard[s]) == 0 {
			continue
		}
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			vals, ver, idx, err := c.seekShardFrom(ctx, s, perShard[s], int(c.rr.Add(1)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				answers = append(answers, ShardAnswer{Shard: s, Err: err})
				failed++
				if firstErr == nil {
					firstErr = fmt.Errorf("shard %d: %w", s, err)
				}
				for _, p := range pos[s] {
					results[p] = Result{Status: proto.StatusMiss, Failed: true}
				}
				return
			}
			answers = append(answers, ShardAnswer{Shard: s, Replica: c.shards[s][idx], Version: ver})
			for j, p := range pos[s] {
				results[p] = Result{Status: vals[j].Status, Value: vals[j].Value}
			}
		}(s)
	}
	wg.Wait()
	switch {
	case failed == 0:
		return results, answers, nil
	case failed == len(answers):
		return results, answers, fmt.Errorf("%w: %w", ErrAllShardsFailed, firstErr)
	}
	return results, answers, fmt.Errorf("%w: %w", ErrSomeShardsFailed, firstErr)
}

// seekShardFrom asks the shard's replicas in order from index first (modulo their number)
// and also returns the index of the replica that answered.
func (c *Client) seekShardFrom(ctx context.Context, shard int, keys []uint64, first int) ([]proto.Value, string, int, error) {
	replicas := c.shards[shard]
	var errs []error
	for attempt := 0; attempt <= max(c.conf.Retry, 0); attempt++ {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		addr := replicas[(first+attempt)%len(replicas)]
		var (
			vals []proto.Value
			ver  string
			err  error
		)
		if c.backup > 0 && len(replicas) > 1 {
			vals, ver, err = c.tryWithBackup(ctx, addr, replicas[(first+attempt+1)%len(replicas)], keys)
		} else {
			vals, ver, err = c.try(ctx, addr, keys)
		}
		if err == nil {
			return vals, ver, (first + attempt) % len(replicas), nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	return nil, "", 0, errors.Join(errs...)
}

// tryWithBackup asks primary and, if it has not answered within the backup
// delay, also backup; the first success wins (brpc's backup_request_ms).
// The loser finishes on its own (bounded by the timeout) and its result is
// dropped into the buffered channel.
func (c *Client) tryWithBackup(ctx context.Context, primary, backup string, keys []uint64) ([]proto.Value, string, error) {
	type result struct {
		vals []proto.Value
		ver  string
		err  error
	}
	ch := make(chan result, 2)
	ask := func(addr string) {
		v, s, err := c.try(ctx, addr, keys)
		ch <- result{v, s, err}
	}
	go ask(primary)
	timer := time.NewTimer(c.backup)
	defer timer.Stop()
	pending := 1
	select {
	case r := <-ch:
		return r.vals, r.ver, r.err
	case <-timer.C:
		go ask(backup)
		pending++
	}
	var errs []error
	for ; pending > 0; pending-- {
		r := <-ch
		if r.err == nil {
			return r.vals, r.ver, nil
		}
		errs = append(errs, r.err)
	}
	return nil, "", errors.Join(errs...)
}

func (c *Client) try(ctx context.Context, addr string, keys []uint64) ([]proto.Value, string, error) {
	p := c.pools[addr]
	conn, err := p.get(c.timeout)
	if err != nil {
		return nil, "", err
	}
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	vals, ver, err := conn.Seek(keys, true, deadline)
	if err != nil {
		conn.Close()
		return nil, "", err
	}
	// Values alias the connection buffer: copy before returning it.
	out := make([]proto.Value, len(vals))
	size := 0
	for _, v := range vals {
		size += len(v.Value)
	}
	arena := make([]byte, 0, size)
	for i, v := range vals {
		start := len(arena)
		arena = append(arena, v.Value...)
		out[i] = proto.Value{Status: v.Status, Value: arena[start:len(arena):len(arena)]}
	}
	p.put(conn)
	return out, ver, nil
}

type pool struct {
	addr string
	idle chan *Conn
}

func (p *pool) get(timeout time.Duration) (*Conn, error) {
	select {
	case c := <-p.idle:
		return c, nil
	default:
		return Dial(p.addr, timeout)
	}
}

func (p *pool) put(c *Conn) {
	select {
	case p.idle <- c:
	default:
		c.Close()
	}
}

func (p *pool) close() {
	for {
		select {
		case c := <-p.idle:
			c.Close()
		default:
			return
		}
	}
}

// LookupHost resolves names of the http:// naming form; tests replace it.
var LookupHost = net.DefaultResolver.LookupHost

// resolveDomain turns "host:port[/path]" into the IPv4 addresses of host at port, as brpc's
// DomainNamingService does (it ignores a path and IPv6 addresses).
func resolveDomain(s string) ([]string, error) {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[:i]
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = s, "80" // brpc's default for http://
	}
	addrs, err := LookupHost(context.Background(), host)
	if err != nil {
		return nil, fmt.Errorf("cube.conf: resolve %q: %w", host, err)
	}
	var out []string
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip != nil && ip.To4() != nil {
			out = append(out, net.JoinHostPort(a, port))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cube.conf: %q has no IPv4 address", host)
	}
	return out, nil
}
