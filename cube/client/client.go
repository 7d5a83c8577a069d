package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
)

// DictConf is one entry of Paddle Serving's cube.conf (a JSON array); the document is
// declared in cube/api, with its parsing.
type DictConf = api.DictConf

// Node is one entry of DictConf.Nodes.
type Node = api.Node

// ParseConf parses a cube.conf document.
func ParseConf(b []byte) ([]DictConf, error) { return api.ParseConf(b) }

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

// Replicas returns the host:port addresses of every shard of d, shard by shard, resolving
// the http:// (DNS) form now.
func Replicas(d DictConf) ([][]string, error) { return d.Shards(resolveDomain) }

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
	shards, err := Replicas(conf)
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

// byShard splits keys by the shard that holds each (api.ShardOf): perShard[s] are shard s's
// keys in request order, pos[s] their indexes in keys.
func (c *Client) byShard(keys []uint64) (perShard [][]uint64, pos [][]int) {
	n := len(c.shards)
	perShard, pos = make([][]uint64, n), make([][]int, n)
	for i, k := range keys {
		s := api.ShardOf(k, n)
		perShard[s] = append(perShard[s], k)
		pos[s] = append(pos[s], i)
	}
	return perShard, pos
}

// SeekShards is Seek that also reports, per shard asked, which replica
// answered and from which version: what a caller needs to see versions mix
// across shards or a shard's replicas disagree. It fans out exactly as
// Paddle's cube-api does: one request per shard, replicas in turn, no
// version checks.
func (c *Client) SeekShards(ctx context.Context, keys []uint64) ([]Result, []ShardAnswer, error) {
	perShard, pos := c.byShard(keys)
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
