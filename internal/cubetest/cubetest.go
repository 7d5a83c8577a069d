// Package cubetest is the tests' one way to build the cube binary (once per test process,
// removed when the tests end) and to start a cube server, and the small helpers the cube's
// tests share (a buffer goroutines write, a request with a bearer token).
package cubetest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Package is the cube binary's main package.
const Package = "github.com/elasticctr/terraform-provider-ctr/cube/cmd/cube"

var (
	once sync.Once
	dir  string
	bin  string
	err  error
)

// build builds the binary on first use; $CUBE_TEST_BINARY names one to use instead (e.g. an
// older build to run the tests against).
func build() (string, error) {
	once.Do(func() {
		if p := os.Getenv("CUBE_TEST_BINARY"); p != "" {
			bin = p
			return
		}
		if dir, err = os.MkdirTemp("", "cube-test-bin-"); err != nil {
			return
		}
		bin = filepath.Join(dir, "cube")
		if out, e := exec.Command("go", "build", "-o", bin, Package).CombinedOutput(); e != nil {
			err = fmt.Errorf("go build %s: %v\n%s", Package, e, out)
		}
	})
	return bin, err
}

// Binary is the cube binary, built on first use.
func Binary(tb testing.TB) string {
	tb.Helper()
	b, err := build()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Main is a TestMain: it builds the binary into *binary first when binary is not nil, runs
// the tests, removes the binary and exits with the tests' code.
func Main(m *testing.M, binary *string) {
	if binary != nil {
		b, err := build()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		*binary = b
	}
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// Server is a "cube server" process a test started.
type Server struct {
	Cmd  *exec.Cmd
	Addr string // where it listens (a kernel-chosen loopback port)
	// ProbeAddr is where it serves the probes alone, if extra flags gave it --probe-listen.
	ProbeAddr string
	exited    chan struct{}
	mu        sync.Mutex
	log       []string
}

// PID is the process's id.
func (s *Server) PID() int { return s.Cmd.Process.Pid }

// Alive reports whether the process still runs.
func (s *Server) Alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Logs is what the process has logged so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.log, "\n")
}

// StartServer starts "cube server --data data --shard shard" on a kernel-chosen loopback
// port with extra flags, waits until it listens, and stops it by PID (interrupt, then kill)
// when the test ends, printing its log if the test failed.
func StartServer(tb testing.TB, data string, shard int, extra ...string) *Server {
	tb.Helper()
	args := append([]string{"server", "--data", data, "--shard", strconv.Itoa(shard), "--listen", "127.0.0.1:0"}, extra...)
	s := &Server{Cmd: exec.Command(Binary(tb), args...), exited: make(chan struct{})}
	stderr, err := s.Cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	addr := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			s.mu.Lock()
			s.log = append(s.log, sc.Text())
			s.mu.Unlock()
			var rec struct {
				Msg, Addr string
				ProbeAddr string `json:"probe_addr"`
			}
			if !sent && json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
				addr <- [2]string{rec.Addr, rec.ProbeAddr}
				sent = true
			}
		}
		_ = s.Cmd.Wait()
		close(s.exited)
	}()
	tb.Cleanup(func() {
		_ = s.Cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.Cmd.Process.Kill()
			<-s.exited
		}
		if tb.Failed() {
			tb.Logf("server (shard %d) log:\n%s", shard, s.Logs())
		}
	})
	select {
	case a := <-addr:
		s.Addr, s.ProbeAddr = a[0], a[1]
	case <-s.exited:
		tb.Fatalf("server exited at start:\n%s", s.Logs())
	case <-time.After(20 * time.Second):
		tb.Fatal("server did not start")
	}
	return s
}

// Serving is what ServeLoopback serves: cube/server's Server, or anything with its Serve and
// Close.
type Serving interface {
	Serve(net.Listener) error
	Close() error
}

// ServeLoopback serves s in this process on a kernel-chosen loopback port until the test
// ends, and returns the address.
func ServeLoopback(tb testing.TB, s Serving) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck // it returns when the cleanup closes s; the test checks what it served
	tb.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}
