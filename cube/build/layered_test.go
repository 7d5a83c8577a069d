package build

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/dict"
	"github.com/elasticctr/terraform-provider-ctr/cube/layers"
	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
)

// TestLayeredDelta builds a base, two layers over it and a full delta over
// the layers: each layer holds only its input's keys, each version opens
// (layers.Open) as the newest value of every key, and the full delta merges
// the chain into a version that needs none of it.
func TestLayeredDelta(t *testing.T) {
	root := t.TempDir()
	want := map[uint64][]byte{}
	build := func(sec int64, base string, layered bool, from, to uint64, gen byte) *layout.Manifest {
		t.Helper()
		kv := map[uint64][]byte{}
		var keys []uint64
		for k := from; k < to; k++ {
			kv[k], want[k] = value(k, gen), value(k, gen)
			keys = append(keys, k)
		}
		in := filepath.Join(t.TempDir(), "in")
		writeInput(t, in, 2, kv, keys)
		m, err := Build(Options{Input: in, Output: root, Shards: 2, Dict: "d", Base: base, Layered: layered, Now: clock(sec)})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	check := func(version string, keys int) {
		t.Helper()
		for shard := range 2 {
			st, err := layers.Open(root, version, shard, dict.Options{})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for k, v := range want {
				if api.ShardOf(k, 2) != shard {
					continue
				}
				n++
				if got, ok := st.Get(nil, k); !ok || !bytes.Equal(got, v) {
					t.Fatalf("%s shard %d: key %d = %x %v, want %x", version, shard, k, got, ok, v)
				}
			}
			if st.Len() != n {
				t.Fatalf("%s shard %d: Len %d, want %d", version, shard, st.Len(), n)
			}
			st.Close()
		}
		if len(want) != keys {
			t.Fatalf("%s: %d keys in the model, want %d", version, len(want), keys)
		}
	}
	base := build(1_700_000_000, "", false, 0, 1000, 1)
	check(base.Version, 1000)
	l1 := build(1_700_000_100, base.Version, true, 500, 1500, 2)
	l2 := build(1_700_000_200, l1.Version, true, 0, 100, 3)
	for _, l := range []*layout.Manifest{l1, l2} {
		if !l.Layered || l.Mode != "delta" {
			t.Fatalf("%s: layered %v, mode %q", l.Version, l.Layered, l.Mode)
		}
	}
	if got := l1.Shards[0].Count + l1.Shards[1].Count; got != 1000 {
		t.Fatalf("layer 1 holds %d keys, want its input's 1000", got)
	}
	if got := l2.Shards[0].Count + l2.Shards[1].Count; got != 100 {
		t.Fatalf("layer 2 holds %d keys, want its input's 100", got)
	}
	if chain, err := layers.Chain(root, l2.Version); err != nil || strings.Join(chain, ",") != l2.Version+","+l1.Version+","+base.Version {
		t.Fatalf("chain of %s: %v %v", l2.Version, chain, err)
	}
	check(l2.Version, 1500)

	full := build(1_700_000_300, l2.Version, false, 1400, 1600, 4)
	if full.Layered {
		t.Fatal("a full delta is layered")
	}
	if got := full.Shards[0].Count + full.Shards[1].Count; got != 1600 {
		t.Fatalf("the full delta holds %d keys, want every key, 1600", got)
	}
	if chain, err := layers.Chain(root, full.Version); err != nil || len(chain) != 1 {
		t.Fatalf("chain of the full delta: %v %v", chain, err)
	}
	check(full.Version, 1600)

	if _, err := Build(Options{Input: t.TempDir(), Output: root, Shards: 2, Dict: "d", Layered: true}); err == nil {
		t.Fatal("a layered build without a base was accepted")
	}
}

// TestLayerChainRefused: a layer whose manifest names itself, or a base
// that is not there, is refused by name instead of looping or opening part
// of a chain.
func TestLayerChainRefused(t *testing.T) {
	root := t.TempDir()
	publish := func(version string, m layout.Manifest) {
		m.Version = version
		dir := filepath.Join(root, version)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(m)
		if err := os.WriteFile(filepath.Join(dir, layout.ManifestName), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	publish("1700000000_1700000001", layout.Manifest{Mode: "delta", Layered: true, Base: "1700000000_1700000001"})
	publish("1700000000_1700000002", layout.Manifest{Mode: "delta", Layered: true, Base: "1700000000"})
	publish("1700000000_1700000003", layout.Manifest{Mode: "delta", Layered: true, Base: "../x"})
	for v, want := range map[string]string{
		"1700000000_1700000001": "more than 64 layers",
		"1700000000_1700000002": `version "1700000000"`,
		"1700000000_1700000003": "not a published version name",
	} {
		if _, err := layers.Open(root, v, 0, dict.Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", v, err, want)
		}
	}
}
