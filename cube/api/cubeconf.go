package api

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// ShardOf is the shard of a key among n, as Paddle's cube client and builder place it.
func ShardOf(key uint64, n int) int { return int(key % uint64(n)) }

// DictConf is one entry of Paddle Serving's cube.conf (a JSON array).
type DictConf struct {
	DictName      string `json:"dict_name"`
	Shard         int    `json:"shard"`
	Dup           int    `json:"dup"`            // replicas; informational, as in cube-api
	Timeout       int    `json:"timeout"`        // ms per attempt; 0 means 1,000
	Retry         int    `json:"retry"`          // extra attempts on other replicas
	BackupRequest int    `json:"backup_request"` // ms; if > 0, ask a second replica when the first is this slow
	Type          string `json:"type"`           // ipport, ipport_list, ipport_parallel
	LoadBalancer  string `json:"load_balancer"`  // parsed; replicas are used round-robin
	Nodes         []Node `json:"nodes"`
}

// Node is one entry of DictConf.Nodes.
type Node struct {
	IP         string  `json:"ip,omitempty"`
	Port       FlexInt `json:"port,omitempty"`
	IPPortList string  `json:"ipport_list,omitempty"`
}

// FlexInt is a port as cube.conf writers give it: 8027 or "8027".
type FlexInt int

// UnmarshalJSON accepts a number or a string of one.
func (f *FlexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		return nil
	}
	n, err := strconv.Atoi(s)
	*f = FlexInt(n)
	return err
}

// ParseConf parses a cube.conf document.
func ParseConf(b []byte) ([]DictConf, error) {
	var confs []DictConf
	if err := json.Unmarshal(b, &confs); err != nil {
		return nil, fmt.Errorf("parse cube.conf: %w", err)
	}
	for i := range confs {
		if _, err := confs[i].Shards(func(string) ([]string, error) { return []string{"checked"}, nil }); err != nil {
			return nil, err
		}
	}
	return confs, nil
}

// Shards returns the host:port addresses of every shard, shard by shard, after checking the
// entry's structure; resolve expands the http:// (DNS) form, as brpc's domain naming service
// does. ParseConf checks without resolving: a cube.conf of in-cluster names is valid anywhere.
func (d *DictConf) Shards(resolve func(string) ([]string, error)) ([][]string, error) {
	if d.Shard < 1 {
		return nil, fmt.Errorf("cube.conf dict %q: shard must be >= 1", d.DictName)
	}
	node := func(n Node) ([]string, error) {
		if strings.HasPrefix(n.IPPortList, "http://") {
			// brpc's domain naming service: every IPv4 address of the host, one port, re-resolved
			// by brpc every few seconds. Here it is resolved when the client is made.
			return resolve(strings.TrimPrefix(n.IPPortList, "http://"))
		}
		if n.IPPortList != "" {
			list := strings.TrimPrefix(n.IPPortList, "list://")
			var out []string
			for _, a := range strings.Split(list, ",") {
				a = strings.TrimSpace(a)
				if f := strings.Fields(a); len(f) > 0 { // "ip:port tag"
					out = append(out, f[0])
				}
			}
			if len(out) == 0 {
				return nil, fmt.Errorf("cube.conf dict %q: empty ipport_list", d.DictName)
			}
			return out, nil
		}
		if n.IP == "" || n.Port == 0 {
			return nil, fmt.Errorf("cube.conf dict %q: node needs ip and port or ipport_list", d.DictName)
		}
		return []string{fmt.Sprintf("%s:%d", n.IP, n.Port)}, nil
	}
	shards := make([][]string, d.Shard)
	switch d.Type {
	case "ipport", "ipport_list":
		if len(d.Nodes) < d.Shard {
			return nil, fmt.Errorf("cube.conf dict %q: %d nodes for %d shards", d.DictName, len(d.Nodes), d.Shard)
		}
		for i := range shards {
			r, err := node(d.Nodes[i])
			if err != nil {
				return nil, err
			}
			shards[i] = r
		}
	case "ipport_parallel":
		if len(d.Nodes) == 0 {
			return nil, fmt.Errorf("cube.conf dict %q: no nodes", d.DictName)
		}
		r, err := node(d.Nodes[0])
		if err != nil {
			return nil, err
		}
		for i := range shards {
			shards[i] = r
		}
	default:
		return nil, fmt.Errorf("cube.conf dict %q: type %q: want ipport, ipport_list or ipport_parallel", d.DictName, d.Type)
	}
	return shards, nil
}
