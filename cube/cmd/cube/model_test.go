package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/client"
	"github.com/elasticctr/terraform-provider-ctr/internal/loopback"
)

// TestModelStandIn: `cube model` writes what a trainer writes (a
// Paddle-layout SequenceFile and a donefile line), the builder takes it, and
// `cube seek --check` verifies every value through a cube.conf — and fails,
// naming the keys, when the generation is not the one served.
func TestModelStandIn(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "model")
	out := cube(t, "model", "--out", root, "--id", "1000", "--keys", "500", "--gen", "7")
	if !strings.Contains(out, "model 1000 written") {
		t.Fatalf("output %q", out)
	}
	line, err := os.ReadFile(filepath.Join(root, "donefile", "base.txt"))
	if err != nil || strings.TrimSpace(string(line)) != `{"id":"1000","key":"1000","input":"../data/1000"}` {
		t.Fatalf("donefile %q (%v)", line, err)
	}
	data := filepath.Join(dir, "dict")
	cube(t, "build", "--input", filepath.Join(root, "data", "1000"), "--output", data, "--shards", "2", "--dict", "d")
	conf := client.DictConf{DictName: "d", Shard: 2, Dup: 1, Timeout: 1000, Type: "ipport_list"}
	for s := range 2 {
		conf.Nodes = append(conf.Nodes, client.Node{IPPortList: "list://" + startServer(t, data, s)})
	}
	b, _ := json.Marshal([]client.DictConf{conf})
	confPath := filepath.Join(dir, "cube.conf")
	if err := os.WriteFile(confPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := cube(t, "seek", "--conf", confPath, "--first", "500", "--check", "7"); !strings.Contains(out, "checked 500 keys: every value is generation 7's") {
		t.Fatalf("check: %q", out)
	}
	// --for: random lookups for a while, every value checked; a value size other than the
	// model's makes every lookup fail.
	if out := cube(t, "seek", "--conf", confPath, "--first", "500", "--for", "500ms", "--workers", "2", "--batch", "50"); !strings.Contains(out, " 0 failed, 0 mixing versions") {
		t.Fatalf("seek --for: %q", out)
	}
	if b, err := exec.Command(cubeBin, "seek", "--conf", confPath, "--first", "500", "--for", "300ms", "--value-size", "41").CombinedOutput(); err == nil ||
		!strings.Contains(string(b), "failed lookups") || strings.Contains(string(b), " 0 failed,") {
		t.Fatalf("seek --for with the wrong value size: err %v, output %s", err, b)
	}
	// --for waits (--ready-within) for a cube that does not answer yet, and does not count
	// that time as failures; one that never answers fails once the wait is over.
	lateConf := client.DictConf{DictName: "d", Shard: 2, Dup: 1, Timeout: 1000, Type: "ipport_list",
		Nodes: []client.Node{conf.Nodes[0], {}}}
	latePath := filepath.Join(dir, "late.conf")
	// withLateShard points late.conf's second shard at addr, where nothing listens yet.
	withLateShard := func(addr string) {
		lateConf.Nodes[1] = client.Node{IPPortList: "list://" + addr}
		b, _ := json.Marshal([]client.DictConf{lateConf})
		if err := os.WriteFile(latePath, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// seekWhileShardStarts runs seek on late.conf with args, starts the late shard 1.5 s
	// later, and returns seek's output once it says it waited for every shard.
	seekWhileShardStarts := func(what string, args ...string) string {
		addr := freeAddr(t)
		withLateShard(addr)
		seek := exec.Command(cubeBin, append([]string{"seek", "--conf", latePath}, args...)...)
		var out strings.Builder
		seek.Stdout, seek.Stderr = &out, &out
		if err := seek.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
		startServer(t, data, 1, "--listen", addr)
		if err := seek.Wait(); err != nil || !regexp.MustCompile(`every shard answers \(after [1-9][0-9.]*s\)`).MatchString(out.String()) {
			t.Fatalf("%s against a shard that answers after 1.5 s: err %v, output %s", what, err, out.String())
		}
		return out.String()
	}
	withLateShard(freeAddr(t))
	if b, err := exec.Command(cubeBin, "seek", "--conf", latePath, "--first", "500", "--for", "300ms", "--ready-within", "1s").CombinedOutput(); err == nil ||
		!strings.Contains(string(b), "did not answer within 1s") {
		t.Fatalf("seek --for against a shard that never answers: err %v, output %s", err, b)
	}
	if out := seekWhileShardStarts("seek --for", "--first", "500", "--for", "500ms", "--ready-within", "30s"); !strings.Contains(out, " 0 failed, 0 mixing versions") {
		t.Fatalf("seek --for against a shard that answers after 1.5 s: %s", out)
	}
	// A one-shot lookup given --ready-within waits the same way; without it, it fails.
	withLateShard(freeAddr(t))
	if b, err := exec.Command(cubeBin, "seek", "--conf", latePath, "--first", "500", "--check", "7").CombinedOutput(); err == nil {
		t.Fatalf("a one-shot lookup without --ready-within against a shard that is not up: %s", b)
	}
	if out := seekWhileShardStarts("a one-shot lookup with --ready-within", "--first", "500", "--check", "7", "--ready-within", "30s"); !strings.Contains(out, "checked 500 keys: every value is generation 7's") {
		t.Fatalf("a one-shot lookup with --ready-within against a shard that answers after 1.5 s: %s", out)
	}
	cmd := exec.Command(cubeBin, "seek", "--conf", confPath, "--first", "3", "--check", "8", "600")
	b, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "4 of 4 keys do not hold generation 8") || !strings.Contains(string(b), "600\tMISS") ||
		!strings.Contains(string(b), "2\tWRONG") {
		t.Fatalf("a wrong generation and a missing key: err %v, output %s", err, b)
	}
	if b, err := exec.Command(cubeBin, "model", "--out", root, "--id", "x").CombinedOutput(); err == nil || !strings.Contains(string(b), "decimal") {
		t.Fatalf("a non-numeric id: err %v, output %s", err, b)
	}
}

// freeAddr is a loopback address nothing listens on (yet), never handed out before.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := loopback.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
