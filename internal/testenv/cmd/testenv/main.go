// Command testenv builds, starts and stops the local control plane used by tests and the demo.
//
//	testenv build          build (or find cached) every binary
//	testenv up   [-dir D] [-node [-image TAR]...]
//	                       build if needed, start (with the real node), print the kubeconfig path
//	testenv down [-dir D]  stop every process by its recorded pid
//	testenv env  [-dir D]  print KUBECONFIG=... (and the real node's CLUSTER_DNS) for a running environment
//	testenv node-vars [-dir D]  Terraform variables (JSON) that place a namespace's pods on the real node
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/internal/testenv"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	dir := fs.String("dir", ".testenv", "folder that holds the environment's state (pids, logs, kubeconfig)")
	repo := fs.String("repo", ".", "repository root (the kcp module is built from internal/testenv/kcp)")
	node := fs.Bool("node", false, "up: also start the real node (kubelet, containerd, CNI bridge, CoreDNS, kube-proxy; root; one per machine)")
	var images imageFlags
	fs.Var(&images, "image", "up -node: an image `tarball` to import into the node's containerd (repeatable)")
	_ = fs.Parse(os.Args[2:])

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var err error
	switch cmd {
	case "build":
		_, err = build(ctx, *repo)
	case "up":
		var bin *testenv.Binaries
		if bin, err = build(ctx, *repo); err == nil {
			var e *testenv.Env
			var opts *testenv.NodeOptions
			if *node {
				opts = &testenv.NodeOptions{Images: images}
			}
			if e, err = testenv.Up(ctx, *dir, bin, os.Stderr, opts); err == nil {
				fmt.Println(e.Kubeconfig())
			}
		}
	case "down":
		err = testenv.Down(*dir, os.Stderr)
	case "env":
		var e *testenv.Env
		if e, err = testenv.Load(*dir); err == nil {
			fmt.Printf("KUBECONFIG=%s\n", e.Kubeconfig())
			if e.Node {
				// What a script outside the cluster needs to reach the real node's pods.
				fmt.Printf("CLUSTER_DNS=%s:53\n", testenv.NodeIP)
				fmt.Printf("NODE_IMAGES=%s\n", strings.Join(e.NodeImages, ","))
			}
		}
	case "node-vars":
		// Terraform variables (JSON) that put a namespace's pods on the real node.
		var e *testenv.Env
		if e, err = testenv.Load(*dir); err == nil {
			err = nodeVars(e)
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

// nodeVars prints real_node_image (the project's image imported into the node) and
// real_node_namespace_annotations as a Terraform variables file.
func nodeVars(e *testenv.Env) error {
	if !e.Node {
		return fmt.Errorf("the environment in %s has no real node (up -node)", e.Dir)
	}
	image := e.NodeImage(stack.CubeImageRepository)
	if image == "" {
		return fmt.Errorf("no %s image imported into the real node (up -node -image dist/image/cube-image.tar)", stack.CubeImageRepository)
	}
	out, err := json.MarshalIndent(map[string]any{
		"real_node_image":                 image,
		"real_node_namespace_annotations": testenv.RealNodeNamespace(),
	}, "", "  ")
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

func build(ctx context.Context, repo string) (*testenv.Binaries, error) {
	cache, err := testenv.CacheDir()
	if err != nil {
		return nil, err
	}
	root, err := filepath.Abs(repo)
	if err != nil {
		return nil, err
	}
	b := &testenv.Builder{RepoRoot: root, Cache: cache, Log: os.Stderr}
	return b.Build(ctx)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testenv build|up|down|env|node-vars [-dir DIR] [-repo ROOT] [-node [-image TAR]...]")
	os.Exit(2)
}

type imageFlags []string

func (f *imageFlags) String() string     { return fmt.Sprint([]string(*f)) }
func (f *imageFlags) Set(v string) error { *f = append(*f, v); return nil }
