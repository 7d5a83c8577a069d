package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/procstat"
	"github.com/elasticctr/terraform-provider-ctr/internal/loopback"
	"github.com/prometheus/common/expfmt"
)

// clockTicks is the kernel's USER_HZ, read from the auxiliary vector
// (AT_CLKTCK) since sysconf needs cgo; 100 on every mainstream Linux.
var clockTicks = func() float64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err == nil {
		for i := 0; i+16 <= len(b); i += 16 {
			if binary.LittleEndian.Uint64(b[i:]) == 17 { // AT_CLKTCK
				if v := binary.LittleEndian.Uint64(b[i+8:]); v > 0 {
					return float64(v)
				}
			}
		}
	}
	return 100
}()

// processCPU returns utime+stime of pid in seconds, from /proc/<pid>/stat.
func processCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name, which may contain spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	ut, err1 := strconv.ParseFloat(f[11], 64) // field 14 utime
	st, err2 := strconv.ParseFloat(f[12], 64) // field 15 stime
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad /proc stat times")
	}
	return (ut + st) / clockTicks, nil
}

// peakRSSEvery is how often RunPeakRSS samples a child's peak resident set.
const peakRSSEvery = 10 * time.Millisecond

// RunPeakRSS runs cmd to completion and returns its peak resident set in KiB: its VmHWM,
// sampled every peakRSSEvery until it exits (what it gains in its last moments is missed).
// getrusage's ru_maxrss cannot tell: Go starts a child with a vfork-style clone that shares
// the parent's memory until exec, and Linux then carries the parent's high-water mark into
// the child's, so a small child of a large benchmark process reported the benchmark's peak.
func RunPeakRSS(cmd *exec.Cmd) (int64, error) {
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	var peak atomic.Int64
	sample := func() {
		if kib, err := procstat.KiB(cmd.Process.Pid, "VmHWM"); err == nil {
			peak.Store(max(peak.Load(), kib))
		}
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(peakRSSEvery)
		defer t.Stop()
		for {
			sample()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	err := cmd.Wait()
	close(stop)
	<-stopped
	return peak.Load(), err
}

// proc is a server process started by the benchmark, stopped by its PID.
type proc struct {
	cmd  *exec.Cmd
	addr string
	once sync.Once
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	})
}

func startCube(ctx context.Context, o Options, data string) (*proc, error) {
	args := []string{"server", "--data", data, "--shard", "0",
		"--listen", "127.0.0.1:0", "--log-level", "info"}
	if o.InMemory {
		args = append(args, "--in-memory")
	}
	args = append(args, o.ServerArgs...)
	argv := pinned(o.ServerCPUs, append([]string{o.CubeBinary}, args...)...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start cube server %q: %w", o.CubeBinary, err)
	}
	p := &proc{cmd: cmd}
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
				select {
				case addrCh <- rec.Addr:
				default:
				}
			}
		}
	}()
	// The server verifies its dictionary before it listens: a pass over the
	// index that reads every record at random, about 3 µs a key on the
	// 2-core VM while neighbours ran.
	wait := min(30*time.Second+time.Duration(o.Keys)*10*time.Microsecond, 15*time.Minute)
	select {
	case p.addr = <-addrCh:
		return p, nil
	case <-time.After(wait):
		p.stop()
		return nil, fmt.Errorf("cube server did not start within %s", wait)
	}
}

// peerServer is how to run one of Peers: its server's command line and its client.
type peerServer[C mgetConn] struct {
	system string // its name in the results, e.g. "redis (MGET)"
	exe    string // the server's executable
	// argv is the server's pinned command line, serving on 127.0.0.1:port.
	argv func(port string) []string
	dial func(addr string) (C, error)
	// request names what ready asks in an error, e.g. "PING"; ready succeeds once the
	// server serves.
	request string
	ready   func(C) error
	load    func(C) error // writes every key
	// about says what runs (version, threads), once it has started.
	about func() string
}

// start starts the server, waits up to 20s until it answers, loads every key into it, and
// says so on w.
func (ps peerServer[C]) start(ctx context.Context, o Options, w io.Writer) (*system, error) {
	t0 := time.Now()
	port, err := loopback.Port()
	if err != nil {
		return nil, err
	}
	argv := ps.argv(strconv.Itoa(port))
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", ps.exe, err)
	}
	p := &proc{cmd: cmd, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if withConn(p.addr, ps.dial, ps.ready) == nil {
			break
		}
		if !time.Now().Before(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s did not answer %s within 20s", filepath.Base(ps.exe), ps.request)
		}
	}
	s := &system{name: ps.system, proc: p, worker: peerWorker(func() (C, error) { return ps.dial(p.addr) }, o)}
	if err := withConn(p.addr, ps.dial, ps.load); err != nil {
		return s, err
	}
	fmt.Fprintf(w, "%s; loaded %d keys in %.1fs\n", ps.about(), o.Keys, time.Since(t0).Seconds())
	return s, nil
}

// withConn dials addr, runs f on the connection and closes it.
func withConn[C io.Closer](addr string, dial func(string) (C, error), f func(C) error) error {
	c, err := dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return f(c)
}

// waitGauge waits until the cube server at addr reports gauge satisfying
// done (cube_dict_unchecked_bytes 0: every block checked;
// cube_dict_bytes_in_memory the dictionary's size: its copy made).
func waitGauge(ctx context.Context, addr, gauge string, done func(float64) bool) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		n, err := scrapeGauge("http://"+addr+"/metrics", gauge)
		if err == nil && done(n) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cube server %s: %s still %v after 10 minutes (%v)", addr, gauge, n, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// scrapeGauge sums the samples of the gauge name at a Prometheus endpoint.
func scrapeGauge(url, name string) (float64, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, fmt.Errorf("metrics of %s: %w", url, err)
	}
	mf, ok := families[name]
	if !ok {
		return 0, fmt.Errorf("%s exports no %s", url, name)
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		sum += m.GetGauge().GetValue()
	}
	return sum, nil
}
