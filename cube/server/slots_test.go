package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
)

// dialFrom connects to addr from the loopback address from (127.0.0.0/8 is
// all loopback on Linux): each source address is a client of its own.
func dialFrom(from, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return d.Dial("tcp", addr)
}

// holdAfterOneRequest connects from from, has one valid seek answered, and
// keeps the connection open and idle: what the red team held 200 slots
// with.
func holdAfterOneRequest(from, addr string) (net.Conn, error) {
	c, err := dialFrom(from, addr)
	if err != nil {
		return nil, err
	}
	meta := proto.RpcMeta{HasRequest: true, Service: []byte(proto.DictServiceFull), Method: []byte("seek"), CorrelationID: 1}
	out, start, ms := proto.BeginFrame(nil, &meta)
	out = proto.FinishFrame(proto.AppendDictRequest(out, []uint64{1}, false), start, ms)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var f proto.Frame
	if _, err = c.Write(out); err == nil {
		_, err = proto.ReadFrame(c, nil, 1<<20, &f)
	}
	_ = c.SetDeadline(time.Time{})
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// holdMany opens n connections, perClient from each of the addresses
// 127.0.0.2, 127.0.0.3, ..., each kept by hold; it fails the test unless
// all open.
func holdMany(t *testing.T, addr string, n, perClient int, hold func(from, addr string) (net.Conn, error)) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			k := 2 + i/perClient
			from := fmt.Sprintf("127.0.%d.%d", k/250, k%250)
			conns[i], errs[i] = hold(from, addr)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("attack connection %d of %d: %v", i, n, err)
		}
	}
	return conns
}

// getsIn times a fresh client from 127.0.0.1: a connection and one seek,
// then a GET /healthz on a fresh connection, as the kubelet's probe.
func getsIn(t *testing.T, addr string) time.Duration {
	t.Helper()
	start := time.Now()
	c, err := client.Dial(addr, time.Second)
	if err != nil {
		t.Fatalf("a fresh client: %v", err)
	}
	defer c.Close()
	if _, _, err := c.Seek([]uint64{1}, false, time.Now().Add(time.Second)); err != nil {
		t.Fatalf("a fresh client's seek after %v: %v", time.Since(start), err)
	}
	hc := http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz after %v: %v", time.Since(start), err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /healthz: %s", resp.Status)
	}
	return time.Since(start)
}

// TestIdleClientsCannotLockOut: every slot held by clients that sent one
// valid request and then wait (five clients, 10 connections each) no longer
// locks a new client or a probe out: the longest-idle connection of the
// client holding the most is closed to make room. Before, the new
// connection was closed at accept, for as long as the attack lasted.
func TestIdleClientsCannotLockOut(t *testing.T) {
	_, addr := serveWith(t, 100, func(o *Options) { o.MaxConns = 50 })
	holdMany(t, addr, 50, 10, holdAfterOneRequest)
	if took := getsIn(t, addr); took > time.Second {
		t.Fatalf("a fresh client got in after %v, want within 1s", took)
	}
	if n := metric(t, addr, "cube_connections_closed_total", `reason="evicted"`); n < 2 {
		t.Fatalf("evicted = %v, want at least 2 (the seek's and the probe's connections)", n)
	}
}

// halfFrame connects from from and sends half a baidu_std header: a busy
// connection, in the middle of a request (--read-timeout bounds it).
func halfFrame(from, addr string) (net.Conn, error) {
	c, err := dialFrom(from, addr)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte("PRPC\x00\x00")); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// TestPerClientShare: one client gets no more than --max-conns-per-client
// slots, so it cannot take the others' (a new connection over its share
// closes the client's own longest-idle one, or is closed at accept when its
// connections are all busy); and busy connections are never closed to make
// room.
func TestPerClientShare(t *testing.T) {
	srv, addr := serveWith(t, 100, func(o *Options) { o.MaxConns = 40; o.MaxConnsPerClient = 20 })
	holdMany(t, addr, 20, 20, halfFrame) // all from 127.0.0.2, all busy
	waitConns(t, srv, func(_ int, _ map[string]int, busy int) bool { return busy == 20 })
	if !halfFrameClosed(t, "127.0.0.2", addr) {
		t.Fatal("the client's 21st connection was not closed at accept")
	}
	if n := metric(t, addr, "cube_connections_rejected_total", `reason="per_client"`); n != 1 {
		t.Fatalf("per_client rejections = %v, want 1", n)
	}
	if took := getsIn(t, addr); took > time.Second {
		t.Fatalf("another client got in after %v, want within 1s", took)
	}
	// The metrics' keep-alive connection would be idle, and closed to make
	// room: every connection from 127.0.0.1 gone, then 20 more busy ones.
	http.DefaultClient.CloseIdleConnections()
	waitConns(t, srv, func(_ int, per map[string]int, _ int) bool { return per["127.0.0.1"] == 0 })
	holdMany(t, addr, 20, 20, func(_, addr string) (net.Conn, error) { return halfFrame("127.0.0.3", addr) })
	waitConns(t, srv, func(_ int, _ map[string]int, busy int) bool { return busy == 40 })
	if !halfFrameClosed(t, "127.0.0.4", addr) {
		t.Fatal("a connection over --max-conns, every slot busy, was not closed at accept")
	}
	// Read in the process: a GET /metrics would be refused too.
	if n := gathered(t, srv, "cube_connections_rejected_total", "max_conns"); n < 1 {
		t.Fatalf("max_conns rejections = %v, want at least 1", n)
	}
}

// halfFrameClosed connects from from, sends half a frame and tells whether the server closes
// the connection (closedByServer).
func halfFrameClosed(t *testing.T, from, addr string) bool {
	t.Helper()
	c, err := halfFrame(from, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return closedByServer(c)
}

// closedByServer tells whether the server closes c within 5 s (EOF or a
// reset), not leaving it waiting.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// waitConns waits until ok holds of the server's connection count,
// connections per client and busy connections.
func waitConns(t *testing.T, srv *Server, ok func(n int, perClient map[string]int, busy int) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		srv.mu.Lock()
		done := ok(len(srv.conns), srv.perClient, srv.busyLocked())
		n, per := len(srv.conns), fmt.Sprint(srv.perClient)
		srv.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections: %d, per client %s", n, per)
		}
	}
}

// gathered reads a counter of srv's registry whose one label other than
// shard has the value label.
func gathered(t *testing.T, srv *Server, name, label string) float64 {
	t.Helper()
	mfs, err := srv.m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() != "shard" && lp.GetValue() == label {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// TestTenThousandIdleConnections: the cube binary with its default limits,
// 10,000 connections open from 40 clients, each having sent one request:
// a fresh client and a probe still get in within a second.
func TestTenThousandIdleConnections(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < 10_500 {
		t.Skipf("the descriptor limit (%d) is below the 10,500 this test needs", lim.Cur)
	}
	p := startCube(t, buildData(t, 100))
	start := time.Now()
	holdMany(t, p.Addr, 10_000, 250, holdAfterOneRequest)
	t.Logf("10,000 connections opened in %v", time.Since(start).Round(time.Millisecond))
	took := getsIn(t, p.Addr)
	t.Logf("a fresh client's seek and a probe took %v", took)
	if took > time.Second {
		t.Fatalf("a fresh client got in after %v, want within 1s", took)
	}
}
