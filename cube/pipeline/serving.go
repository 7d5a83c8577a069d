package pipeline

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
	"github.com/elasticctr/terraform-provider-ctr/internal/loopback"
)

// Serving is Paddle Serving beside the pipeline: `cube serving` (the launcher) following the
// cube, with the stand-in of Paddle's server binary.
type Serving struct {
	*Proc        // the launcher; Addr is its status port (GET /status, /healthz)
	Addr  string // where the server answers GeneralModelService (baidu_std and HTTP)
	// ReloadInterval is the server's reload check: a new dense model serves within it once
	// the launcher has put it in place.
	ReloadInterval time.Duration
}

// StartServing starts the launcher: it waits for the cube to serve a version, fetches
// serving/<id>.tar.gz of that version from the file server, starts the stand-in with the
// cluster's cube.conf, and follows every version after it (polling the transfer's /status).
func (c *Cluster) StartServing() (*Serving, error) {
	dir := filepath.Join(c.Dir, "serving")
	if err := os.MkdirAll(filepath.Join(dir, "work"), 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "cube.conf")
	if err := c.WriteConf(conf); err != nil {
		return nil, err
	}
	bin, err := filepath.Abs(c.opts.Bin)
	if err != nil {
		return nil, err
	}
	standin := filepath.Join(dir, servingconf.StandinName)
	os.Remove(standin)
	if err := os.Symlink(bin, standin); err != nil {
		return nil, err
	}
	port, err := loopback.Port()
	if err != nil {
		return nil, err
	}
	status, err := loopback.Addr()
	if err != nil {
		return nil, err
	}
	s := &Serving{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), ReloadInterval: time.Second}
	s.Proc = &Proc{Name: "serving", Addr: status, bin: c.opts.Bin, log: filepath.Join(c.Dir, "logs", "serving.log"), args: []string{"serving",
		"--model-url", "http://" + c.FileServer.Addr + "/serving/{id}.tar.gz", "--cube-status", "http://" + c.Transfer.Addr + "/status",
		"--cube-conf", conf, "--serving-bin", standin, "--dir", filepath.Join(dir, "work"), "--port", strconv.Itoa(port),
		"--poll", "200ms", "--reload-interval", strconv.Itoa(int(s.ReloadInterval / time.Second)), "--status-listen", status}}
	c.say("starting Paddle Serving (cube serving with the stand-in) on %s, following the cube", s.Addr)
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// String names the serving for messages.
func (s *Serving) String() string {
	return fmt.Sprintf("serving on %s (launcher status %s)", s.Addr, s.Proc.Addr)
}
