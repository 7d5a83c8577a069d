package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/cube/proto"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest/inproc"
)

func TestParseConf(t *testing.T) {
	confs, err := ParseConf([]byte(`[
	  {"dict_name":"a","shard":2,"dup":1,"timeout":200,"retry":3,"backup_request":100,"type":"ipport",
	   "nodes":[{"ip":"10.0.0.1","port":8027},{"ip":"10.0.0.2","port":"8028"}]},
	  {"dict_name":"b","shard":2,"dup":2,"timeout":200,"retry":1,"backup_request":0,"type":"ipport_list",
	   "nodes":[{"ipport_list":"list://cube-0-0:8027,cube-0-1:8027"},{"ipport_list":"list://cube-1-0:8027 tag1, cube-1-1:8027"}]},
	  {"dict_name":"c","shard":3,"dup":1,"timeout":200,"retry":1,"backup_request":0,"type":"ipport_parallel",
	   "nodes":[{"ip":"h","port":1}]}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	want := [][][]string{
		{{"10.0.0.1:8027"}, {"10.0.0.2:8028"}},
		{{"cube-0-0:8027", "cube-0-1:8027"}, {"cube-1-0:8027", "cube-1-1:8027"}},
		{{"h:1"}, {"h:1"}, {"h:1"}},
	}
	for i, c := range confs {
		got, _ := Replicas(c)
		if fmt.Sprint(got) != fmt.Sprint(want[i]) {
			t.Errorf("%s: %v, want %v", c.DictName, got, want[i])
		}
	}
	for _, bad := range []string{
		`[{"dict_name":"x","shard":2,"type":"ipport","nodes":[{"ip":"a","port":1}]}]`,
		`[{"dict_name":"x","shard":1,"type":"zk","nodes":[{"ip":"a","port":1}]}]`,
		`[{"dict_name":"x","shard":0,"type":"ipport","nodes":[]}]`,
		`{"dict_name":"x"}`,
	} {
		if _, err := ParseConf([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// serveKeys builds keys 0..n-1 (value = decimal key) into shards shards and serves them
// in-process on loopback ports, returning their addresses shard by shard.
func serveKeys(t *testing.T, shards, n int) []string {
	return inproc.Serve(t, "d", shards, func(w *seqfile.Writer) {
		for k := 0; k < n; k++ {
			w.Append(uint64(k), fmt.Append(nil, k))
		}
	})
}

func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

func TestSeekFanOutAndRetry(t *testing.T) {
	shards := serveKeys(t, 2, 100)
	s0, s1 := shards[0], shards[1]
	dead := deadAddr(t)
	conf := DictConf{DictName: "d", Shard: 2, Timeout: 1000, Retry: 1, Type: "ipport_list", Nodes: []Node{
		{IPPortList: "list://" + dead + "," + s0},
		{IPPortList: "list://" + s1 + "," + dead},
	}}
	c, err := New(conf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys := []uint64{5, 4, 99, 1000, 0, 1}
	for round := 0; round < 4; round++ { // round-robin hits the dead replica in some rounds
		res, _, err := c.Seek(context.Background(), keys)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i, k := range keys {
			want := fmt.Sprint(k)
			if k >= 100 {
				if res[i].Found() || res[i].Status != proto.StatusMiss {
					t.Fatalf("key %d: found", k)
				}
				continue
			}
			if !res[i].Found() || string(res[i].Value) != want {
				t.Fatalf("round %d key %d: %+v", round, k, res[i])
			}
		}
	}
	// Without retries, a shard whose only replica is down fails its keys.
	conf.Retry = 0
	conf.Nodes[0] = Node{IPPortList: "list://" + s0}
	conf.Nodes[1] = Node{IPPortList: "list://" + dead}
	c2, _ := New(conf)
	defer c2.Close()
	res, _, err := c2.Seek(context.Background(), keys)
	if !errors.Is(err, ErrSomeShardsFailed) {
		t.Fatalf("err = %v", err)
	}
	var failed []uint64
	for i, r := range res {
		if r.Failed {
			failed = append(failed, keys[i])
		}
	}
	if !slices.Equal(failed, []uint64{5, 99, 1}) {
		t.Fatalf("failed keys %v, want the odd ones", failed)
	}
}

// TestBackupRequest puts a replica that accepts but never answers next to a
// live one: with backup_request every seek returns long before the timeout.
func TestBackupRequest(t *testing.T) {
	live := serveKeys(t, 1, 10)[0]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold it open, say nothing
		}
	}()
	conf := DictConf{DictName: "d", Shard: 1, Timeout: 3000, Retry: 0, BackupRequest: 30, Type: "ipport_list",
		Nodes: []Node{{IPPortList: "list://" + ln.Addr().String() + "," + live}}}
	c, err := New(conf)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for round := 0; round < 4; round++ {
		start := time.Now()
		res, _, err := c.Seek(context.Background(), []uint64{3})
		if err != nil || !res[0].Found() || string(res[0].Value) != "3" {
			t.Fatalf("round %d: %v %+v", round, err, res)
		}
		if el := time.Since(start); el > time.Second {
			t.Fatalf("round %d took %s: the backup request was not sent", round, el)
		}
	}
}
