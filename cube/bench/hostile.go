package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/procstat"
)

// HostileOptions configure RunHostile. Zero values take the documented
// defaults.
type HostileOptions struct {
	// Conns is the number of hostile connections held open, a quarter of
	// each kind; if 0, 2,400. It is lowered to fit this process's
	// descriptor limit (RLIMIT_NOFILE) with 200 to spare.
	Conns int
	// Keys, ValueSize and Batch shape the normal client's load; if 0,
	// 100,000 keys of 40 bytes, 1,000 keys per request.
	Keys, ValueSize, Batch int
	// Duration is the measuring time of each phase; if 0, 5s (plus a tenth
	// of it to warm up), so a run takes about 15s.
	Duration time.Duration
	// CubeBinary is started as "cube server"; if empty, os.Executable().
	CubeBinary string
	// ServerArgs are extra flags for "cube server".
	ServerArgs []string
	// WorkDir holds the generated data; if empty, a removed temp directory.
	WorkDir string
}

// defaults applies the defaults of o and returns the options of the normal
// client's workload.
func (o *HostileOptions) defaults() (Options, error) {
	if o.Conns <= 0 {
		o.Conns = 2400
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && int64(o.Conns) > int64(lim.Cur)-200 {
		o.Conns = max(0, int(lim.Cur)-200)
	}
	o.Conns -= o.Conns % len(hostileKinds)
	bo := Options{Keys: o.Keys, ValueSize: o.ValueSize, Batch: o.Batch, Duration: o.Duration, Conns: 1,
		CubeBinary: o.CubeBinary, ServerArgs: o.ServerArgs}
	err := bo.workload(100_000, 5*time.Second)
	return bo, err
}

// hostileKind opens one hostile connection: it sends what a peer that never
// finishes would send and leaves the connection open. Goroutines it starts
// end when the connection is closed.
type hostileKind struct {
	name string
	open func(c net.Conn) error
}

var hostileKinds = []hostileKind{
	{"half-sent baidu_std headers", func(c net.Conn) error {
		_, err := c.Write([]byte("PRPC\x00\x00")) // 6 of the 12 header bytes
		return err
	}},
	{"slowloris HTTP headers", func(c net.Conn) error {
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: cube\r\n"); err != nil {
			return err
		}
		go func() { // one more header byte every second, never the blank line
			for {
				time.Sleep(time.Second)
				if _, err := c.Write([]byte("X")); err != nil {
					return
				}
			}
		}()
		return nil
	}},
	{"idle HTTP keep-alives", func(c net.Conn) error {
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: cube\r\n\r\n"); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		_ = c.SetReadDeadline(time.Time{})
		return err
	}},
	{"64 MiB-declared baidu_std frames (1 MiB sent)", func(c net.Conn) error {
		frame := make([]byte, 12+1<<20)
		copy(frame, "PRPC\x04\x00\x00\x00\x00\x00\x00\x10") // body 64 MiB, meta 16 B
		if _, err := c.Write(frame[:12]); err != nil {
			return err
		}
		// The server may close the connection instead of buffering the
		// rest (--max-inflight-bytes): that is the defence, not a failure.
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, _ = c.Write(frame[12:])
		return nil
	}},
}

// hostileResult is the measurement of one phase.
type hostileResult struct {
	Result
	healthz time.Duration // one GET /healthz on a new connection
}

// RunHostile starts a cube server process on 127.0.0.1, measures a normal
// baidu_std client alone, then with o.Conns hostile connections open, and
// prints both side by side with the server's peak resident memory.
func RunHostile(ctx context.Context, o HostileOptions, w io.Writer) error {
	bo, err := o.defaults()
	if err != nil {
		return err
	}
	work, done, err := workDir(o.WorkDir, "cube-bench-hostile-")
	if err != nil {
		return err
	}
	defer done()
	data := filepath.Join(work, "data")
	if _, err := prepare(work, data, bo); err != nil {
		return err
	}
	srv, err := startCube(ctx, bo, data)
	if err != nil {
		return err
	}
	defer srv.stop()
	fmt.Fprintf(w, "cube bench hostile: %d keys x %d B, batch %d, 1 client connection, %v per phase, %d hostile connections\n",
		bo.Keys, bo.ValueSize, bo.Batch, bo.Duration, o.Conns)

	calm, err := measure(ctx, bo, srv)
	if err != nil {
		return err
	}
	rssBefore, err := procstat.KiB(srv.pid(), "VmRSS")
	if err != nil {
		return err
	}
	start := time.Now()
	conns, opened, failed := openHostile(ctx, srv.addr, o.Conns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	fmt.Fprintf(w, "opened %d hostile connections in %.1fs (%d failed to open):", len(conns), time.Since(start).Seconds(), failed)
	for i, k := range hostileKinds {
		fmt.Fprintf(w, " %d %s%s", opened[i], k.name, map[bool]string{true: ",", false: "\n"}[i < len(hostileKinds)-1])
	}
	loaded, err := measure(ctx, bo, srv)
	if err != nil {
		return err
	}
	hwm, err := procstat.KiB(srv.pid(), "VmHWM")
	if err != nil {
		return err
	}
	alive := 0
	for _, c := range conns {
		if stillOpen(c) {
			alive++
		}
	}

	tw := tabwriter.NewWriter(w, 12, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\t%s\t%s\t\n", "alone", fmt.Sprintf("with %d hostile", len(conns)))
	fmt.Fprintf(tw, "requests/s\t%.0f\t%.0f\t\n", calm.ReqPerSec(), loaded.ReqPerSec())
	fmt.Fprintf(tw, "p50 latency\t%v\t%v\t\n", calm.P50.Round(time.Microsecond), loaded.P50.Round(time.Microsecond))
	fmt.Fprintf(tw, "p99 latency\t%v\t%v\t\n", calm.P99.Round(time.Microsecond), loaded.P99.Round(time.Microsecond))
	fmt.Fprintf(tw, "errors\t%d\t%d\t\n", calm.Errors+calm.Mismatches, loaded.Errors+loaded.Mismatches)
	fmt.Fprintf(tw, "GET /healthz\t%v\t%v\t\n", calm.healthz.Round(time.Microsecond), loaded.healthz.Round(time.Microsecond))
	_ = tw.Flush()
	fmt.Fprintf(w, "server VmRSS before the hostile connections: %.1f MiB; peak (VmHWM) with them: %.1f MiB\n",
		float64(rssBefore)/1024, float64(hwm)/1024)
	fmt.Fprintf(w, "hostile connections still open at the end: %d of %d (the server's timeouts close the rest)\n", alive, len(conns))
	if loaded.Requests == 0 || loaded.Errors > 0 || loaded.Mismatches > 0 || calm.Errors > 0 {
		return errors.New("the normal client failed requests")
	}
	return nil
}

// measure drives one normal client connection, then times a /healthz.
func measure(ctx context.Context, bo Options, srv *proc) (hostileResult, error) {
	r, err := drive(ctx, bo, "cube", srv.pid(), cubeWorker(srv.addr, bo))
	if err != nil {
		return hostileResult{}, err
	}
	start := time.Now()
	hc := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + srv.addr + "/healthz")
	if err != nil {
		return hostileResult{}, fmt.Errorf("GET /healthz: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return hostileResult{}, fmt.Errorf("GET /healthz: %s", resp.Status)
	}
	return hostileResult{Result: r, healthz: time.Since(start)}, nil
}

// openHostile opens n connections, the kinds in turn, 64 at a time, and
// returns those open, how many of each kind opened and how many failed.
func openHostile(ctx context.Context, addr string, n int) ([]net.Conn, []int, int) {
	conns := make([]net.Conn, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
				return
			}
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				errs[i] = err
				return
			}
			conns[i] = c
			errs[i] = hostileKinds[i%len(hostileKinds)].open(c)
		}()
	}
	wg.Wait()
	opened := make([]int, len(hostileKinds))
	var kept []net.Conn
	failed := 0
	for i, c := range conns {
		if c != nil {
			kept = append(kept, c)
		}
		if errs[i] == nil {
			opened[i%len(hostileKinds)]++
		} else {
			failed++
		}
	}
	return kept, opened, failed
}

// stillOpen tells whether the server has not closed c (a read that would
// block, rather than EOF or a reset).
func stillOpen(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
