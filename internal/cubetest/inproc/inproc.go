// Package inproc serves a cube in the test's own process: records built into shards with
// cube/build, each shard served by cube/server on a loopback port until the test ends (for a
// `cube server` process, see cubetest.StartServer).
package inproc

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/cube/build"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
	"github.com/elasticctr/terraform-provider-ctr/cube/server"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

// Serve builds the records write appends (Writer errors are sticky: Serve checks them) into
// dictionary dict of shards shards, in a temporary folder, and serves every shard on a
// loopback port until the test ends. It returns the shards' addresses, shard by shard.
func Serve(tb testing.TB, dict string, shards int, write func(w *seqfile.Writer)) []string {
	tb.Helper()
	dir := tb.TempDir()
	in, data := filepath.Join(dir, "in"), filepath.Join(dir, "data")
	if err := os.MkdirAll(in, 0o755); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Create(filepath.Join(in, "part-0"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w, err := seqfile.NewWriter(f, [16]byte{7})
	if err != nil {
		tb.Fatal(err)
	}
	write(w)
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	if _, err := build.Build(build.Options{Input: in, Output: data, Shards: shards, Dict: dict}); err != nil {
		tb.Fatal(err)
	}
	addrs := make([]string, shards)
	for shard := range shards {
		srv, err := server.New(server.Options{DataDir: data, Shard: shard})
		if err != nil {
			tb.Fatal(err)
		}
		addrs[shard] = cubetest.ServeLoopback(tb, srv)
	}
	return addrs
}
