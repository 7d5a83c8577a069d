// Package pipeline runs the whole cube rollout on one machine as real
// processes on 127.0.0.1 — file server, transfer, shard servers with their
// agents — feeds it synthetic versions through a donefile, and checks
// lookups under load. "cube demo", "cube bench rollout" and the fault tests
// use it.
package pipeline

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/cube/modelout"
	"github.com/elasticctr/terraform-provider-ctr/internal/loopback"
)

// Options configure a Cluster.
type Options struct {
	Bin       string // the cube binary
	Dir       string // everything goes below it
	Shards    int
	Replicas  int
	Dict      string // dictionary name; "demo" when empty
	Keys      int    // keys per version (0..Keys-1)
	ValueSize int    // bytes per value, >= 10; 40 as Paddle's demos
	// Embedding makes every value an embedding a model can use (Model.Embedding).
	Embedding bool
	Poll      time.Duration // transfer --poll
	// HealInterval is the transfer's --heal-interval; 250 ms when 0.
	HealInterval time.Duration
	// TransferArgs and ServerArgs are appended to the commands.
	TransferArgs, ServerArgs []string
	Progress                 io.Writer // step-by-step narration (nil: none)
}

// Cluster is a running pipeline.
type Cluster struct {
	opts       Options
	Dir        string // Options.Dir: processes' data, logs and the transfer's work directory
	Root       string // file server root: donefile/, data/<id>/
	Donefile   string // URL of base.txt
	TokenFile  string
	Token      string
	FileServer *Proc
	Transfer   *Proc
	FilesAddr  string    // the transfer's /files/ (--files-listen)
	Servers    [][]*Proc // [shard][replica]
	Conf       client.DictConf

	newServer    func(shard, replica int) (*Proc, error)
	transferArgs []string // without the --shard-replicas of the current layout
}

// DataDir is the data directory of replica r of shard s.
func (c *Cluster) DataDir(s, r int) string {
	return filepath.Join(c.Dir, fmt.Sprintf("node-%d-%d", s, r))
}

// layout sets the transfer's replica flags and the cube.conf from Servers.
func (c *Cluster) layout() {
	args := append([]string(nil), c.transferArgs...)
	c.Conf.Nodes = nil
	for s, row := range c.Servers {
		var addrs []string
		for _, p := range row {
			addrs = append(addrs, p.Addr)
		}
		args = append(args, "--shard-replicas", fmt.Sprintf("%d=%s", s, strings.Join(addrs, ",")))
		c.Conf.Nodes = append(c.Conf.Nodes, client.Node{IPPortList: "list://" + strings.Join(addrs, ",")})
	}
	c.Conf.Dup = len(c.Servers[0])
	c.Transfer.SetArgs(func([]string) []string { return append(args, c.opts.TransferArgs...) })
}

// AddReplica starts one more replica of shard s, empty, and restarts the
// transfer with it in its replica list (as ctr_cube does on replicas = N+1).
func (c *Cluster) AddReplica(s int) (*Proc, error) {
	p, err := c.newServer(s, len(c.Servers[s]))
	if err != nil {
		return nil, err
	}
	c.say("adding %s on %s", p.Name, p.Addr)
	if err := p.Start(); err != nil {
		return nil, err
	}
	c.Servers[s] = append(c.Servers[s], p)
	c.layout()
	c.Transfer.Stop()
	return p, c.Transfer.Start()
}

func (c *Cluster) say(format string, args ...any) {
	if c.opts.Progress != nil {
		fmt.Fprintf(c.opts.Progress, format+"\n", args...)
	}
}

// Start launches the file server, the shard servers and the transfer.
func Start(o Options) (*Cluster, error) {
	if o.ValueSize < 10 {
		o.ValueSize = DefaultValueSize
	}
	if o.Poll <= 0 {
		o.Poll = 100 * time.Millisecond
	}
	if o.HealInterval <= 0 {
		o.HealInterval = 250 * time.Millisecond
	}
	c := &Cluster{opts: o, Dir: o.Dir, Root: filepath.Join(o.Dir, "fileserver"), Token: "demo-token-" + strconv.Itoa(os.Getpid())}
	for _, d := range []string{filepath.Join(c.Root, "donefile"), filepath.Join(c.Root, "data"), filepath.Join(o.Dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	c.TokenFile = filepath.Join(o.Dir, "token")
	if err := os.WriteFile(c.TokenFile, []byte(c.Token+"\n"), 0o600); err != nil {
		return nil, err
	}
	newProc := func(name string, args ...string) (*Proc, error) {
		addr, err := loopback.Addr()
		if err != nil {
			return nil, err
		}
		return &Proc{Name: name, Addr: addr, bin: o.Bin, args: append(args, "--listen", addr), log: filepath.Join(o.Dir, "logs", name+".log")}, nil
	}
	var err error
	if c.FileServer, err = newProc("fileserver", "fileserver", "--root", c.Root); err != nil {
		return nil, err
	}
	c.Donefile = "http://" + c.FileServer.Addr + "/donefile/base.txt"
	if c.Transfer, err = newProc("transfer"); err != nil {
		return nil, err
	}
	// The built versions are served apart from the status API, as in the
	// cluster, where a NetworkPolicy admits only cube servers to them.
	if c.FilesAddr, err = loopback.Addr(); err != nil {
		return nil, err
	}
	public := "http://" + c.FilesAddr
	dict := o.Dict
	if dict == "" {
		dict = "demo"
	}
	c.Conf = client.DictConf{DictName: dict, Shard: o.Shards, Dup: o.Replicas, Timeout: 1000, Retry: o.Replicas, Type: "ipport_list"}
	targs := []string{"transfer", "--donefile", c.Donefile, "--dict", dict,
		"--work", filepath.Join(o.Dir, "transfer"), "--control-token-file", c.TokenFile, "--public-url", public,
		"--files-listen", c.FilesAddr, "--mode", "base_delta", "--poll", o.Poll.String(), "--heal-interval", o.HealInterval.String(), "--retry-after", "500ms"}
	c.newServer = func(s, r int) (*Proc, error) {
		p, err := newProc(fmt.Sprintf("server-%d-%d", s, r), "server", "--data", c.DataDir(s, r),
			"--shard", strconv.Itoa(s), "--control-token-file", c.TokenFile, "--agent", "--source-url", public+"/files/")
		if err != nil {
			return nil, err
		}
		p.args = append(p.args, o.ServerArgs...)
		return p, nil
	}
	for s := range o.Shards {
		var row []*Proc
		for r := range o.Replicas {
			p, err := c.newServer(s, r)
			if err != nil {
				return nil, err
			}
			row = append(row, p)
		}
		c.Servers = append(c.Servers, row)
	}
	c.transferArgs = append(targs, c.Transfer.args...)
	c.layout()
	c.say("starting the file server on %s (root %s)", c.FileServer.Addr, c.Root)
	if err := c.FileServer.Start(); err != nil {
		return c, err
	}
	for _, row := range c.Servers {
		for _, p := range row {
			c.say("starting %s on %s (agent on the same port)", p.Name, p.Addr)
			if err := p.Start(); err != nil {
				return c, err
			}
		}
	}
	c.say("starting the transfer on %s, watching %s", c.Transfer.Addr, c.Donefile)
	if err := c.Transfer.Start(); err != nil {
		return c, err
	}
	return c, nil
}

// Close stops every process.
func (c *Cluster) Close() {
	procs := []*Proc{c.Transfer, c.FileServer}
	for _, row := range c.Servers {
		procs = append(procs, row...)
	}
	var wg sync.WaitGroup
	for _, p := range procs {
		if p != nil {
			wg.Add(1)
			go func() { defer wg.Done(); p.Stop() }()
		}
	}
	wg.Wait()
}

// WriteConf writes a Paddle Serving cube.conf for the cluster.
func (c *Cluster) WriteConf(path string) error {
	b, err := json.MarshalIndent([]client.DictConf{c.Conf}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Value is what key k holds in the version with generation gen: the key
// (8 bytes LE), gen, then filler.
func Value(k uint64, gen byte, size int) []byte {
	v := make([]byte, size)
	binary.LittleEndian.PutUint64(v, k)
	for i := 8; i < size; i++ {
		v[i] = gen
	}
	return v
}

// Publish writes a new input for id under the file server's root and
// appends its line to the donefile, as a trainer does (see WriteModel).
func (c *Cluster) Publish(id string, gen byte, patchOf string) error {
	return c.PublishServing(id, gen, patchOf, "")
}

// PublishServing is Publish with the version's serving model folder (serving/<id>.tar.gz).
func (c *Cluster) PublishServing(id string, gen byte, patchOf, servingModel string) error {
	return c.PublishModel(Model{ID: id, Gen: gen, PatchOf: patchOf, Embedding: c.opts.Embedding, ServingModel: servingModel})
}

// PublishModel publishes m, its keys and value size the cluster's unless m says otherwise.
func (c *Cluster) PublishModel(m Model) error {
	if m.Keys == 0 {
		m.Keys = c.opts.Keys
	}
	if m.ValueSize == 0 {
		m.ValueSize = c.opts.ValueSize
	}
	return WriteModel(c.Root, m)
}

// PatchStride is the keys a synthetic patch holds: every PatchStride-th
// key, from key 0.
const PatchStride = 3

// Model is a synthetic model version, as a trainer would write it.
type Model struct {
	ID      string // donefile id (a decimal number, increasing)
	Gen     byte   // generation: every value's bytes after the key (see Value)
	PatchOf string // for a patch (patch.txt): the id of its base; "" for a base
	Keys    int    // keys 0..Keys-1 (a patch holds every PatchStride-th)
	// PatchKeys, if set, is how many keys a patch holds: the first
	// PatchKeys of every PatchStride-th key.
	PatchKeys int
	ValueSize int // bytes per value, >= 10
	// Embedding makes every value Embedding(key, gen, ValueSize/4), float32s a model can
	// use, instead of Value's bytes.
	Embedding bool
	// ServingModel, if set, is a serving model folder published with the version
	// (serving/<id>/ and serving/<id>.tar.gz, see modelout.AddServingModel).
	ServingModel string
}

// WriteModel writes m as Paddle's trainers do, all or nothing (modelout): a SequenceFile in
// Paddle's layout (raw 8-byte little-endian key, the value's bytes) at
// <root>/data/<id>/part-00000, then its line in <root>/donefile/base.txt (or patch.txt),
// which names the input as ../data/<id>: the file server serving <root> is what the transfer
// reads.
func WriteModel(root string, m Model) error {
	if m.ValueSize < 10 {
		return fmt.Errorf("value size %d: want at least 10 bytes (the key and a generation)", m.ValueSize)
	}
	if m.Embedding && m.ValueSize%4 != 0 {
		return fmt.Errorf("value size %d: an embedding is float32s, a multiple of 4 bytes", m.ValueSize)
	}
	if _, err := strconv.ParseUint(m.ID, 10, 63); err != nil {
		return fmt.Errorf("id %q: want a decimal number", m.ID)
	}
	w, err := modelout.Begin(root, modelout.Version{ID: m.ID, PatchOf: m.PatchOf})
	if err != nil {
		return err
	}
	step := 1
	if m.PatchOf != "" {
		step = PatchStride
	}
	for k, n := 0, 0; k < m.Keys && (m.PatchOf == "" || m.PatchKeys == 0 || n < m.PatchKeys); k, n = k+step, n+1 {
		v := Value(uint64(k), m.Gen, m.ValueSize)
		if m.Embedding {
			v = EmbeddingBytes(uint64(k), m.Gen, m.ValueSize/4)
		}
		if err := w.Append(uint64(k), v); err != nil {
			w.Abort()
			return err
		}
	}
	if m.ServingModel != "" {
		if err := w.AddServingModel(m.ServingModel); err != nil {
			w.Abort()
			return err
		}
	}
	_, err = w.Commit()
	return err
}

// Embedding is key k's embedding of dim floats in generation gen: exact small fractions in
// [-0.25, 0.25], the same on every machine, different for every key and generation.
func Embedding(k uint64, gen byte, dim int) []float32 {
	out := make([]float32, dim)
	for j := range out {
		h := (k*2654435761 + uint64(j)*40503 + uint64(gen)*97) % 2001
		out[j] = (float32(h) - 1000) / 4000
	}
	return out
}

// GenOf is the generation whose model (WriteModel, in either layout: Value's bytes or an
// Embedding) holds value for key; false when no generation's does.
func GenOf(key uint64, value []byte) (byte, bool) {
	if len(value) >= 10 && binary.LittleEndian.Uint64(value) == key && bytes.Equal(value, Value(key, value[8], len(value))) {
		return value[8], true
	}
	if len(value) == 0 || len(value)%4 != 0 {
		return 0, false
	}
	first := math.Float32frombits(binary.LittleEndian.Uint32(value))
	for g := 1; g < 256; g++ {
		if Embedding(key, byte(g), 1)[0] == first && bytes.Equal(value, EmbeddingBytes(key, byte(g), len(value)/4)) {
			return byte(g), true
		}
	}
	return 0, false
}

// EmbeddingBytes is Embedding as a cube value: little-endian float32s.
func EmbeddingBytes(k uint64, gen byte, dim int) []byte {
	b := make([]byte, 4*dim)
	for j, f := range Embedding(k, gen, dim) {
		binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(f))
	}
	return b
}

// AppendDonefile appends raw text to a donefile, as a trainer does.
func (c *Cluster) AppendDonefile(name, text string) error {
	return appendFile(filepath.Join(c.Root, "donefile", name), text)
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Status reads the transfer's GET /status. Its state (phase, decided version, history) is
// the transfer's now; the replicas' answers (Shards, ServedVersion) may be up to about a
// second old: they are shared among the requests of a second (see FreshStatus).
func (c *Cluster) Status() (api.Status, error) {
	var st api.Status
	resp, err := http.Get("http://" + c.Transfer.Addr + api.StatusPath)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// FreshStatus is Status with replicas' answers asked for after it was called, so that
// what a test did to a replica just before shows.
func (c *Cluster) FreshStatus() (api.Status, error) {
	called := time.Now()
	for deadline := called.Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, err := c.Status()
		if err != nil || !st.RepliesAsOf.Before(called) || time.Now().After(deadline) {
			return st, err
		}
	}
}

// WaitServed waits until the transfer reports donefile id served and every
// replica serves that version; it returns the rollout's record.
func (c *Cluster) WaitServed(id string, timeout time.Duration) (api.Record, error) {
	deadline := time.Now().Add(timeout)
	var last api.Status
	for time.Now().Before(deadline) {
		st, err := c.Status()
		if err == nil {
			last = st
			for i := len(st.History) - 1; i >= 0; i-- {
				h := st.History[i]
				if h.ID == id && h.Result == "served" && st.ServedVersion == h.Version && allServe(st, h.Version) {
					return h, nil
				}
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	b, _ := json.Marshal(last)
	return api.Record{}, fmt.Errorf("id %s not served within %s; last status %s", id, timeout, b)
}

// TimeToHeal kills replica r of shard s, removes its data (a pod back on
// another node, or on emptyDir storage), starts it again and returns how
// long until the transfer reports it serving the decided version.
func (c *Cluster) TimeToHeal(s, r int, timeout time.Duration) (time.Duration, error) {
	p := c.Servers[s][r]
	p.Kill()
	if err := os.RemoveAll(c.DataDir(s, r)); err != nil {
		return 0, err
	}
	if err := p.Start(); err != nil {
		return 0, err
	}
	start := time.Now()
	for time.Since(start) < timeout {
		st, err := c.Status()
		if err == nil && st.DecidedVersion != "" && st.Shards[s].Replicas[r].ServedVersion == st.DecidedVersion {
			return time.Since(start), nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0, fmt.Errorf("replica %s not healed within %s", p.Name, timeout)
}

func allServe(st api.Status, v string) bool {
	for _, s := range st.Shards {
		for _, r := range s.Replicas {
			if r.ServedVersion != v {
				return false
			}
		}
	}
	return true
}

// CheckReplicas returns an error if any reachable replica serves a version
// other than want (the transfer's served version).
func (c *Cluster) CheckReplicas(want string) error {
	st, err := c.Status()
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range st.Shards {
		for _, r := range s.Replicas {
			if r.State != "unreachable" && r.ServedVersion != want {
				errs = append(errs, fmt.Errorf("shard %d replica %s serves %q, want %q", s.Shard, r.Addr, r.ServedVersion, want))
			}
		}
	}
	return errors.Join(errs...)
}

// CheckReplicasDirect asks every replica's agent itself (the transfer may be
// down) and returns an error if one serves a version other than want.
func (c *Cluster) CheckReplicasDirect(want string) error {
	var errs []error
	for s, row := range c.Servers {
		for _, p := range row {
			req, _ := http.NewRequest(http.MethodGet, "http://"+p.Addr+api.AgentStatusPath, nil)
			req.Header.Set("Authorization", "Bearer "+c.Token)
			resp, err := (&http.Client{Timeout: time.Second}).Do(req)
			if err != nil {
				continue // down or hung: answers nothing
			}
			var st api.AgentStatus
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err == nil && st.ServedVersion != want {
				errs = append(errs, fmt.Errorf("shard %d replica %s serves %q, want %q", s, p.Addr, st.ServedVersion, want))
			}
		}
	}
	return errors.Join(errs...)
}
