package server

import (
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/cube/procstat"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

// The tests below run the cube binary as its own process: what they check
// (a fatal signal, a descriptor limit, resident memory) is about a process.

func TestMain(m *testing.M) { cubetest.Main(m, nil) }

// startCube starts "cube server --data data" (shard 0) with extra flags (see
// cubetest.StartServer).
func startCube(t *testing.T, data string, extra ...string) *cubetest.Server {
	t.Helper()
	return cubetest.StartServer(t, data, 0, extra...)
}

// procStatusKiB reads a field such as VmRSS or VmHWM of /proc/<pid>/status.
func procStatusKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	n, err := procstat.KiB(pid, field)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func healthy(addr string) error {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return errors.New(resp.Status)
	}
	return nil
}

// TestDeclaredFrameSizesDoNotCostMemory sends, in two rounds of 20
// connections, headers that each declare a 64 MiB body followed by 8 MiB of
// it (more than the socket buffers hold, so the write returns only once the
// server has read most of it), and closes them. With --max-inflight-bytes
// 8 MiB the server's peak resident memory must stay within the cap plus
// slack (a server that sizes buffers from the header holds what 20
// connections sent, 160 MiB), while a normal client and /healthz keep being
// served.
func TestDeclaredFrameSizesDoNotCostMemory(t *testing.T) {
	data := t.TempDir()
	publishSized(t, data, "1000000000", 1000, 40, 1)
	p := startCube(t, data, "--max-inflight-bytes", strconv.Itoa(8<<20))
	if err := healthy(p.Addr); err != nil {
		t.Fatal(err)
	}
	base := procStatusKiB(t, p.PID(), "VmRSS")
	stop := make(chan struct{})
	normal := steadyClient(t, p.Addr, stop)
	hdr := []byte("PRPC\x04\x00\x00\x00\x00\x00\x00\x10") // body 64 MiB, meta 16 B
	chunk := make([]byte, 8<<20)
	for range 2 {
		var wg sync.WaitGroup
		var conns []net.Conn
		for range 20 {
			c, err := net.Dial("tcp", p.Addr)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if _, err := c.Write(hdr); err == nil {
					c.Write(chunk) // fails once the server closes the connection
				}
			}()
		}
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	}
	hwm := procStatusKiB(t, p.PID(), "VmHWM")
	close(stop)
	if err := <-normal; err != nil {
		t.Fatal(err)
	}
	if err := healthy(p.Addr); err != nil {
		t.Fatal(err)
	}
	t.Logf("VmRSS %d MiB before, VmHWM %d MiB after 40 x 8 MiB of 64 MiB-declared frames", base>>10, hwm>>10)
	// Twice the cap (the runtime lets the heap reach twice what is live),
	// the garbage of buffers refused on the way, and slack.
	if grew := (hwm - base) >> 10; grew > 56 {
		t.Fatalf("peak resident memory grew by %d MiB with an 8 MiB in-flight cap", grew)
	}
	if n := metric(t, p.Addr, "cube_connections_closed_total", `reason="memory"`); n < 1 {
		t.Fatalf("no connection closed for memory (%v)", n)
	}
}

// TestAcceptErrorsDoNotStopServer lowers the server's descriptor limit with
// prlimit(1), opens connections until accept fails, and checks that the
// server survives, counts the failures, and serves again once the
// connections close.
func TestAcceptErrorsDoNotStopServer(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) not installed")
	}
	data := t.TempDir()
	publishSized(t, data, "1000000000", 100, 40, 1)
	p := startCube(t, data)
	if out, err := exec.Command(prlimit, "--pid", strconv.Itoa(p.PID()), "--nofile=32:32").CombinedOutput(); err != nil {
		t.Fatalf("prlimit: %v %s", err, out)
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 60 { // more than the server has descriptors left
		c, err := net.DialTimeout("tcp", p.Addr, time.Second)
		if err != nil {
			break // the backlog is full
		}
		conns = append(conns, c)
	}
	waitMetricOrExit(t, p, "cube_accept_errors_total")
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	// The server must still be there and serve a new client.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if !p.Alive() {
			t.Fatalf("server exited after accept errors:\n%s", p.Logs())
		}
		c, err := client.Dial(p.Addr, time.Second)
		if err == nil {
			_, _, err = c.Seek([]uint64{1}, false, time.Now().Add(2*time.Second))
			c.Close()
			if err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not serving 10s after the connections closed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitMetricOrExit waits until the server's process exits (a failure) or
// the server's log reports a failed accept; /metrics itself needs a
// descriptor, so the log is what can be read while they are exhausted.
func waitMetricOrExit(t *testing.T, p *cubetest.Server, name string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !p.Alive() {
			t.Fatalf("server exited:\n%s", p.Logs())
		}
		if strings.Contains(p.Logs(), "accept failed") {
			return
		}
	}
	t.Fatalf("no failed accept within 10s (%s)", name)
}

// TestTruncatedDictionaryIsRetired truncates the served shard file in place
// under a running server and queries it: the server must stay up, answer the
// requests that touched the file with an error (never partial values), count
// the fault, and then serve the older complete version.
func TestTruncatedDictionaryIsRetired(t *testing.T) {
	data := t.TempDir()
	publishSized(t, data, "1000000000", 20000, 40, 1)
	publishSized(t, data, "2000000000", 20000, 40, 2)
	p := startCube(t, data)
	keys := make([]uint64, 1000)
	for i := range keys {
		keys[i] = uint64(i * 17)
	}
	c, err := client.Dial(p.Addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, v, err := c.Seek(keys, true, time.Now().Add(5*time.Second)); err != nil || v != "2000000000" {
		t.Fatalf("before truncation: version %q, %v", v, err)
	}
	if err := os.Truncate(filepath.Join(data, "2000000000", layout.ShardFile(0)), 4096); err != nil {
		t.Fatal(err)
	}
	var faults int
	for i := 0; ; i++ {
		if i == 50 {
			t.Fatalf("still not serving the older version after %d requests", i)
		}
		if !p.Alive() {
			t.Fatalf("server died:\n%s", p.Logs())
		}
		vals, v, err := c.Seek(keys, true, time.Now().Add(5*time.Second))
		var rerr *client.RPCError
		if errors.As(err, &rerr) && rerr.Code == proto.ELOGOFF {
			faults++
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		for j, val := range vals {
			if val.Status != 0 || binary.LittleEndian.Uint64(val.Value) != keys[j] || val.Value[39] != v[0]-'0' {
				t.Fatalf("version %s: key %d answered %+v", v, keys[j], val)
			}
		}
		if v == "1000000000" {
			break
		}
	}
	if faults == 0 {
		t.Fatal("no request was refused: the truncated file was not read?")
	}
	if err := healthy(p.Addr); err != nil {
		t.Fatal(err)
	}
	if n := metric(t, p.Addr, "cube_dict_faults_total"); n != 1 {
		t.Fatalf("cube_dict_faults_total = %v, want 1", n)
	}
}
