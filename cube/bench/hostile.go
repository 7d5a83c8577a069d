package bench

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/procstat"
	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
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
	fresh   time.Duration // a new connection's first seek answered
	// freshErr and healthzErr: the fresh client's seek and the /healthz failed
	freshErr, healthzErr error
	peakKiB              int64 // the server's VmHWM (a server for each phase)
}

// An attack runs during one phase: it calls ready once it is in place,
// stops when stop is closed, and returns a line on what it did.
type attack struct {
	name       string
	run        func(ctx context.Context, addr string, ready func(), stop <-chan struct{}) (string, error)
	serverArgs []string // the phase's server flags beyond the bench's
}

// amplifyShare is the --heavy-cpu-share of the second byte-amplification phase: half the
// cores, twice the default, to show what the share buys (on 2 cores, half is one of the two).
const amplifyShare = "0.5"

// RunHostile starts a cube server process on 127.0.0.1 and measures a
// normal baidu_std client alone, then under each attack: o.Conns hostile
// connections of the kinds above held open; byte amplification (requests
// whose response would be huge: one present key asked for two million
// times); and slot holding (o.Conns connections from many clients, each
// having sent one request, then waiting). It prints the phases side by
// side with the server's peak resident memory in each (a server process for
// each phase).
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
	// The slot-holding attack fills every slot: the server's --max-conns is
	// the attack's size (unless given), so that the attack is one of a
	// server full of idle clients.
	bo.ServerArgs = append([]string{"--max-conns", strconv.Itoa(o.Conns)}, bo.ServerArgs...)
	fmt.Fprintf(w, "cube bench hostile: %d keys x %d B, batch %d, 1 client connection, %v per phase, %d hostile connections, server --max-conns %d\n",
		bo.Keys, bo.ValueSize, bo.Batch, bo.Duration, o.Conns, o.Conns)

	attacks := []attack{
		{"alone", nil, nil},
		{"hostile conns", func(ctx context.Context, addr string, ready func(), stop <-chan struct{}) (string, error) {
			start := time.Now()
			conns, opened, failed := openHostile(ctx, addr, o.Conns)
			defer closeAll(conns)
			ready()
			line := fmt.Sprintf("opened %d hostile connections in %.1fs (%d failed to open):", len(conns), time.Since(start).Seconds(), failed)
			for i, k := range hostileKinds {
				line += fmt.Sprintf(" %d %s%s", opened[i], k.name, map[bool]string{true: ",", false: ""}[i < len(hostileKinds)-1])
			}
			<-stop
			alive := 0
			for _, c := range conns {
				if stillOpen(c) {
					alive++
				}
			}
			return line + fmt.Sprintf("; %d still open at the end (the server's timeouts close the rest)", alive), nil
		}, nil},
		{"byte amplification", amplify, nil},
		{"amplification at share " + amplifyShare, amplify, []string{"--heavy-cpu-share", amplifyShare}},
		{"slot holding", func(ctx context.Context, addr string, ready func(), stop <-chan struct{}) (string, error) {
			start := time.Now()
			conns, failed := holdSlots(ctx, addr, o.Conns)
			defer closeAll(conns)
			opened := time.Since(start)
			ready()
			<-stop
			alive := 0
			for _, c := range conns {
				if stillOpen(c) {
					alive++
				}
			}
			return fmt.Sprintf("slot holding: %d connections from %d loopback addresses each sent one request and waited (opened in %.1fs, %d failed); %d still open at the end (the others were closed to admit new ones)",
				len(conns), (o.Conns+slotsPerClient-1)/slotsPerClient, opened.Seconds(), failed, alive), nil
		}, nil},
	}
	results := make([]hostileResult, len(attacks))
	var failures []string
	for i, a := range attacks {
		// A server of its own for each phase: its peak memory is the phase's.
		po := bo
		po.ServerArgs = append(slices.Clone(bo.ServerArgs), a.serverArgs...)
		srv, err := startCube(ctx, po, data)
		if err != nil {
			return err
		}
		line, r, err := phase(ctx, bo, srv, a)
		srv.stop()
		if err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
		if line != "" {
			fmt.Fprintln(w, line)
		}
		results[i] = r
		switch {
		case r.Requests == 0 || r.Errors > 0 || r.Mismatches > 0:
			failures = append(failures, a.name+": the normal client failed requests")
		case r.freshErr != nil:
			failures = append(failures, fmt.Sprintf("%s: a fresh client's seek: %v", a.name, r.freshErr))
		case r.healthzErr != nil:
			failures = append(failures, fmt.Sprintf("%s: GET /healthz: %v", a.name, r.healthzErr))
		}
	}
	tw := tabwriter.NewWriter(w, 12, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, f func(r hostileResult) string) {
		fmt.Fprintf(tw, "%s\t", name)
		for _, r := range results {
			fmt.Fprintf(tw, "%s\t", f(r))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "\t")
	for _, a := range attacks {
		fmt.Fprintf(tw, "%s\t", a.name)
	}
	fmt.Fprintln(tw)
	us := func(d time.Duration) string { return d.Round(time.Microsecond).String() }
	row("requests/s", func(r hostileResult) string { return fmt.Sprintf("%.0f", r.ReqPerSec()) })
	row("p50 latency", func(r hostileResult) string { return us(r.P50) })
	row("p99 latency", func(r hostileResult) string { return us(r.P99) })
	row("errors", func(r hostileResult) string { return strconv.FormatInt(r.Errors+r.Mismatches, 10) })
	row("fresh client", func(r hostileResult) string { return orFailed(us(r.fresh), r.freshErr) })
	row("GET /healthz", func(r hostileResult) string { return orFailed(us(r.healthz), r.healthzErr) })
	row("peak RSS MiB", func(r hostileResult) string { return fmt.Sprintf("%.1f", float64(r.peakKiB)/1024) })
	_ = tw.Flush()
	for i := 1; i < len(results); i++ {
		if results[0].P99 > 0 {
			fmt.Fprintf(w, "ratio p99_%s_vs_alone=%.2f\n", strings.ReplaceAll(attacks[i].name, " ", "_"), float64(results[i].P99)/float64(results[0].P99))
		}
	}
	if len(failures) > 0 {
		return errors.New(strings.Join(failures, "; "))
	}
	return nil
}

// orFailed is s, or "failed" when err is not nil.
func orFailed(s string, err error) string {
	if err != nil {
		return "failed"
	}
	return s
}

// phase starts the attack (if any) on a fresh server, lets it settle,
// measures the normal client, and stops the attack.
func phase(ctx context.Context, bo Options, srv *proc, a attack) (string, hostileResult, error) {
	stop := make(chan struct{})
	var (
		line   string
		runErr error
		wg     sync.WaitGroup
	)
	if a.run != nil {
		ready := make(chan struct{})
		var once sync.Once
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer once.Do(func() { close(ready) }) // also when the attack fails
			line, runErr = a.run(ctx, srv.addr, func() { once.Do(func() { close(ready) }) }, stop)
		}()
		<-ready
		time.Sleep(bo.Duration / 10) // the attack under way
	}
	r, err := measure(ctx, bo, srv)
	close(stop)
	wg.Wait()
	if err == nil {
		err = runErr
	}
	if err != nil {
		return "", r, err
	}
	r.peakKiB, err = procstat.KiB(srv.pid(), "VmHWM")
	return line, r, err
}

// measure drives one normal client connection, then times a fresh
// connection's first seek and a /healthz (as the kubelet probes).
func measure(ctx context.Context, bo Options, srv *proc) (hostileResult, error) {
	r, err := drive(ctx, bo, "cube", srv.pid(), cubeWorker(srv.addr, bo))
	if err != nil {
		return hostileResult{}, err
	}
	res := hostileResult{Result: r}
	start := time.Now()
	if c, err := client.Dial(srv.addr, 5*time.Second); err != nil {
		res.freshErr = err
	} else {
		_, _, res.freshErr = c.Seek([]uint64{0}, false, time.Now().Add(5*time.Second))
		c.Close()
	}
	res.fresh = time.Since(start)
	start = time.Now()
	hc := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + srv.addr + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != 200 {
			err = errors.New(resp.Status)
		}
	}
	res.healthz, res.healthzErr = time.Since(start), err
	return res, nil
}

// amplify sends, on two connections in turn until stop, a 4 MB frame asking
// for key 1 two million times: a response of two million values, which
// --max-response-bytes refuses (error 1003) before it is whole.
func amplify(ctx context.Context, addr string, ready func(), stop <-chan struct{}) (string, error) {
	meta := proto.RpcMeta{HasRequest: true, Service: []byte(proto.DictServiceFull), Method: []byte(proto.SeekMethod)}
	frame, start, ms := proto.BeginFrame(nil, &meta)
	// Key 0, present in the bench's data, two million times: 2 bytes each.
	frame = proto.FinishFrame(proto.AppendDictRequest(frame, make([]uint64, 2_000_000), false), start, ms)
	var (
		wg                 sync.WaitGroup
		mu                 sync.Mutex
		sent, refused, oks int
		firstErr           error
	)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c net.Conn
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			var f proto.Frame
			var in []byte
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				var err error
				if c == nil {
					if c, err = attacker(0).Dial("tcp", addr); err != nil {
						mu.Lock()
						firstErr = cmp.Or(firstErr, err)
						mu.Unlock()
						return
					}
				}
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err = c.Write(frame); err == nil {
					in, err = proto.ReadFrame(c, in, 1<<30, &f)
				}
				mu.Lock()
				sent++
				switch {
				case err != nil:
					c.Close()
					c = nil
				case f.Meta.ErrorCode == proto.EREQUEST:
					refused++
				default:
					oks++
				}
				mu.Unlock()
			}
		}()
	}
	ready() // the two are sending
	wg.Wait()
	if firstErr != nil {
		return "", firstErr
	}
	return fmt.Sprintf("byte amplification: %d requests of 2,000,000 keys (a 4 MB frame, one present key each time), %d refused with error 1003, %d answered in full",
		sent, refused, oks), nil
}

// slotsPerClient is how many connections each attacking client opens
// (--max-conns-per-client is 256 by default).
const slotsPerClient = 250

// attacker dials the i-th attack connection: slotsPerClient from each of
// 127.0.0.2, 127.0.0.3, ... (every 127/8 address is loopback on Linux, and
// each is a client of its own to the server), so that the normal client, on
// 127.0.0.1, is not one of them.
func attacker(i int) *net.Dialer {
	k := 2 + i/slotsPerClient
	return &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, byte(k/250), byte(k%250))}}
}

// holdSlots opens n connections (attacker), each having sent one seek and
// read its answer, and returns those that opened and how many failed.
func holdSlots(ctx context.Context, addr string, n int) ([]net.Conn, int) {
	conns := make([]net.Conn, n)
	meta := proto.RpcMeta{HasRequest: true, Service: []byte(proto.DictServiceFull), Method: []byte(proto.SeekMethod)}
	req, start, ms := proto.BeginFrame(nil, &meta)
	req = proto.FinishFrame(proto.AppendDictRequest(req, []uint64{1}, false), start, ms)
	openEach(n, func(i int) {
		if ctx.Err() != nil {
			return
		}
		c, err := attacker(i).Dial("tcp", addr)
		if err != nil {
			return
		}
		var f proto.Frame
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err = c.Write(req); err == nil {
			_, err = proto.ReadFrame(c, nil, 1<<20, &f)
		}
		_ = c.SetDeadline(time.Time{})
		if err != nil {
			c.Close()
			return
		}
		conns[i] = c
	})
	var kept []net.Conn
	for _, c := range conns {
		if c != nil {
			kept = append(kept, c)
		}
	}
	return kept, n - len(kept)
}

// openEach calls open(i) for every i of [0, n), 64 at a time, and waits for them all.
func openEach(n int, open func(i int)) {
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			open(i)
		})
	}
	wg.Wait()
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// openHostile opens n connections (attacker), the kinds in turn, 64 at a time, and
// returns those open, how many of each kind opened and how many failed.
func openHostile(ctx context.Context, addr string, n int) ([]net.Conn, []int, int) {
	conns := make([]net.Conn, n)
	errs := make([]error, n)
	openEach(n, func(i int) {
		if ctx.Err() != nil {
			errs[i] = ctx.Err()
			return
		}
		c, err := attacker(i).Dial("tcp", addr)
		if err != nil {
			errs[i] = err
			return
		}
		conns[i] = c
		errs[i] = hostileKinds[i%len(hostileKinds)].open(c)
	})
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
