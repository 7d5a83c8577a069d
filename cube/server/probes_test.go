package server

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// probe GETs path from addr on a fresh connection, as the kubelet does, giving up after
// within; it returns the status code, or the error.
func probe(addr, path string, within time.Duration) (int, error) {
	hc := http.Client{Timeout: within, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + addr + path)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestProbesNeverCompeteWithClients: every client slot is held by a connection in the
// middle of a request (busy, so none can be closed to make room). A new connection to the
// main port is closed at accept, the kubelet's probe there too; the probe port
// (--probe-listen) answers /healthz and /readyz within a second, again and again, and takes
// no slot.
func TestProbesNeverCompeteWithClients(t *testing.T) {
	const slots = 40
	p := startCube(t, buildData(t, 100), "--max-conns", "40", "--max-conns-per-client", "20",
		"--read-timeout", "1m", "--probe-listen", "127.0.0.1:0")
	if p.ProbeAddr == "" {
		t.Fatal("the server logged no probe_addr")
	}
	holdMany(t, p.Addr, slots, 20, halfFrame)
	// Counted at accept, busy once the server has read their first bytes: until then
	// one could be closed to make room.
	waitMetric(t, p.ProbeAddr, slots, 5*time.Second, "cube_connections_busy")
	if code, err := probe(p.Addr, "/healthz", time.Second); err == nil {
		t.Fatalf("the main port answered a probe (%d) with every slot busy: the attack did not take effect", code)
	}
	for i := range 10 {
		for _, path := range []string{"/healthz", "/readyz"} {
			start := time.Now()
			code, err := probe(p.ProbeAddr, path, time.Second)
			if err != nil {
				t.Fatalf("probe %d: GET %s on the probe port: %v", i, path, err)
			}
			if code != http.StatusOK {
				t.Fatalf("probe %d: GET %s on the probe port: %d", i, path, code)
			}
			if took := time.Since(start); took > time.Second {
				t.Fatalf("probe %d: GET %s on the probe port took %v, want within 1s", i, path, took)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := metric(t, p.ProbeAddr, "cube_connections"); n != slots {
		t.Fatalf("cube_connections = %v after the probes, want %d: the probes took client slots", n, slots)
	}
	if n := metric(t, p.ProbeAddr, "cube_connections_rejected_total", `reason="max_conns"`); n < 1 {
		t.Fatalf("max_conns rejections = %v, want at least 1 (the main port's probe)", n)
	}
}

// TestProbeListenerBounded: the probe port holds at most ProbeMaxConns connections, and
// closes one that sends nothing within ProbeTimeout. With that many connections open and
// silent, a probe waits (in the listen backlog) until they are closed, then is answered.
func TestProbeListenerBounded(t *testing.T) {
	p := startCube(t, buildData(t, 100), "--probe-listen", "127.0.0.1:0")
	silent := make([]net.Conn, ProbeMaxConns)
	for i := range silent {
		c, err := net.DialTimeout("tcp", p.ProbeAddr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent[i] = c
	}
	start := time.Now()
	code, err := probe(p.ProbeAddr, "/healthz", ProbeTimeout+5*time.Second)
	took := time.Since(start)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /healthz after %v: %d %v", took, code, err)
	}
	if took < ProbeTimeout/2 {
		t.Fatalf("answered after %v with %d connections held: the probe port is not bounded", took, ProbeMaxConns)
	}
	if took > ProbeTimeout+2*time.Second {
		t.Fatalf("answered after %v: the silent connections were not closed after %v", took, ProbeTimeout)
	}
	for i, c := range silent {
		if !closedByServer(c) {
			t.Fatalf("silent connection %d is still open", i)
		}
	}
}
