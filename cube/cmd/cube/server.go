package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/server"
)

func runServer(fs flagSet, stdout, stderr io.Writer) error {
	var o server.Options
	fs.StringVar(&o.DataDir, "data", "", "`directory` of published versions; the newest complete one holding the shard is served")
	fs.IntVar(&o.Shard, "shard", 0, "shard index `I` to serve")
	listen := fs.String("listen", "127.0.0.1:8027", "`HOST:PORT` for baidu_std and HTTP")
	probeListen := fs.String("probe-listen", "", fmt.Sprintf("also serve /healthz, /readyz and /metrics, as --listen does, on this `HOST:PORT`, whose connections hold none of --max-conns: the kubelet's probes never wait for a client's slot. At most %d connections at once (the next waits until one closes), each closed when it sends no whole request within %v or writes no answer within %v (default: none)", server.ProbeMaxConns, server.ProbeTimeout, server.ProbeTimeout))
	fs.IntVar(&o.MaxFrameSize, "max-frame-size", server.DefaultMaxFrameSize, "largest baidu_std frame body in `bytes`")
	fs.IntVar(&o.MaxKeys, "max-keys", 0, "refuse seek requests with more keys (baidu_std: error 1003 EREQUEST, not retried by brpc; HTTP: 400); 0 = no limit, as Paddle's cube")
	fs.IntVar(&o.MaxResponseBytes, "max-response-bytes", server.DefaultMaxResponseBytes, fmt.Sprintf("largest seek response in `bytes` (at most %d); a request whose response would be larger, or with more keys than such a response answers, is refused (baidu_std: error 1003 EREQUEST; HTTP: 413 or 400). The default is the -max_body_size Paddle Serving gives brpc, which refuses a larger response anyway", server.MaxResponseLimit))
	fs.IntVar(&o.MaxConns, "max-conns", server.DefaultMaxConns, "most concurrent client connections; a new one over it closes the longest-idle connection of the client holding the most, or is closed at accept when none is idle")
	fs.IntVar(&o.MaxConnsPerClient, "max-conns-per-client", server.DefaultMaxConnsPerClient, "most connections of one client (remote IP), kept the same way within its own")
	fs.Float64Var(&o.HeavyShare, "heavy-cpu-share", server.DefaultHeavyShare, fmt.Sprintf("share of the cores that requests of more than %d keys may use together, in (0, 1]: they take turns, at most share × cores at once (rounded up), and pause between slices of their work when they run ahead of the share, leaving the rest to ordinary requests", server.HeavyKeys))
	fs.Int64Var(&o.MaxInflightBytes, "max-inflight-bytes", server.DefaultMaxInflightBytes, fmt.Sprintf("most `bytes` of requests being read and served across all connections: baidu_std frame bodies beyond %d KiB each (a frame over it closes its connection), and each request's keys and response beyond %d KiB (a request over it is refused: error 1003, HTTP 503)", server.FreeFrameBytes>>10, server.FreeReplyBytes>>10))
	fs.DurationVar(&o.HeaderTimeout, "header-timeout", server.DefaultHeaderTimeout, "a new connection's first bytes and an HTTP request's header must arrive within this")
	fs.DurationVar(&o.ReadTimeout, "read-timeout", server.DefaultReadTimeout, "a baidu_std frame (or an HTTP request with its body) must arrive within this once its first byte has")
	fs.DurationVar(&o.WriteTimeout, "write-timeout", server.DefaultWriteTimeout, "a response must be written within this")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", server.DefaultIdleTimeout, "close a connection that sends no request for this long")
	fs.IntVar(&o.MaxHeaderBytes, "max-header-bytes", server.DefaultMaxHeaderBytes, "largest HTTP request header in `bytes`")
	fs.IntVar(&o.MaxValueSize, "max-value-size", 0, "answer values larger than this many `bytes` as misses (1024 = Paddle's cube; 0 = no limit)")
	fs.DurationVar(&o.ScrubInterval, "scrub-interval", server.DefaultScrubInterval, "check the served dictionary against its checksums again this often, and stop serving it when it no longer matches (0: only when it is opened)")
	fs.BoolVar(&o.InMemory, "in-memory", false, "copy dictionaries into huge-page-backed memory instead of serving them from a read-only file mapping")
	tokenFile := fs.String("control-token-file", "", "require \"Authorization: Bearer <token>\" on /ControlService/cmd and /agent/*, the token read from this `file` (again when it changes, the token it replaced accepted for "+strconv.Itoa(int(api.ControlTokenGrace/time.Minute))+" minutes more: a rotated Secret needs no restart) or from $CUBE_CONTROL_TOKEN (default: no auth on /ControlService/cmd, as Paddle's agent expects)")
	fs.BoolVar(&o.Agent, "agent", false, "enable the rollout agent (/agent/prepare, commit, abort, status) on the same port; needs a control token and --source-url")
	fs.StringVar(&o.SourceURL, "source-url", "", "the agent downloads only from URLs below this `URL` (the transfer's --public-url + /files/)")
	fs.Int64Var(&o.DiskReserve, "disk-reserve", server.DefaultDiskReserve, "free `bytes` the agent keeps on --data beyond a download (refuses prepare otherwise)")
	newLogger := logFlag(fs, logLevelHelp)
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile to this `file` until the server stops (for benchmarking)")
	if err := fs.parse(); err != nil {
		return err
	}
	if o.DataDir == "" {
		return errors.New("--data is required") // before the profile file is created
	}
	if err := checkProbeListen(*probeListen, *listen); err != nil {
		return err
	}
	if o.HeavyShare <= 0 || o.HeavyShare > 1 {
		return fmt.Errorf("--heavy-cpu-share %g: want a share of the cores in (0, 1]", o.HeavyShare)
	}
	if o.MaxResponseBytes > server.MaxResponseLimit {
		return fmt.Errorf("--max-response-bytes %d: at most %d (a frame's length is 32 bits)", o.MaxResponseBytes, server.MaxResponseLimit)
	}
	stop, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	if *tokenFile != "" {
		o.ControlTokenFile = *tokenFile // read again when it changes
	} else {
		o.ControlToken = strings.TrimSpace(os.Getenv("CUBE_CONTROL_TOKEN"))
	}
	o.Log = newLogger(stderr)
	srv, err := server.New(o) // load problems are logged; an empty shard still serves
	if srv == nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	ls := []listener{{ln, srv}}
	logged := []any{"addr", ln.Addr().String(), "shard", o.Shard, "version", version}
	if *probeListen != "" {
		pln, err := net.Listen("tcp", *probeListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("--probe-listen: %w", err)
		}
		ls = append(ls, listener{limited(pln, server.ProbeMaxConns), probeService(srv.ProbeHandler(), o.Log)})
		logged = append(logged, "probe_addr", pln.Addr().String())
	}
	o.Log.Info("listening", logged...)
	return serveUntilSignal(o.Log, ls...)
}

// probeService serves the probe listener: every wait bounded by server.ProbeTimeout, so
// that a connection opened and left frees its place among server.ProbeMaxConns soon. Its
// connection errors are logged at debug level, as the main port's are.
func probeService(h http.Handler, log *slog.Logger) *http.Server {
	s := boundedService(h, server.ProbeTimeout, server.ProbeTimeout)
	s.ReadHeaderTimeout, s.IdleTimeout = server.ProbeTimeout, server.ProbeTimeout
	s.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	return s
}

// checkProbeListen refuses a --probe-listen that is not HOST:PORT with a numeric port, or
// that is --listen's own address.
func checkProbeListen(addr, listen string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--probe-listen %q: want HOST:PORT: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("--probe-listen %q: the port must be a number from 0 to 65535", addr)
	}
	if addr == listen && port != "0" {
		return fmt.Errorf("--probe-listen %q is --listen's address; the probes need a port of their own", addr)
	}
	return nil
}

// readSecret reads a token from file, else from the environment variable
// env; "" if neither is set. An empty file is an error (a Secret mounted
// without its key), not "no token".
func readSecret(file, env string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("token file %q is empty", file)
		}
		return tok, nil
	}
	return strings.TrimSpace(os.Getenv(env)), nil
}
