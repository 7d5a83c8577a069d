// Command kcp is one multi-call binary for the local control plane used by tests:
//
//	kcp etcd --data-dir DIR [--listen 127.0.0.1:PORT]
//	kcp kube-apiserver FLAGS...
//	kcp kube-controller-manager FLAGS...
//	kcp kube-scheduler FLAGS...
//	kcp kubelet FLAGS...            (the real node: see ../node.go)
//	kcp kube-proxy FLAGS...
//	kcp provisioner --kubeconfig K --dir D  (host-path volumes any pod can write)
//
// It lives in its own module so that k8s.io/kubernetes stays out of the provider's go.mod.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kcp etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kube-proxy|provisioner [flags]")
		os.Exit(2)
	}
	name := os.Args[1]
	os.Args = append([]string{name}, os.Args[2:]...)
	switch name {
	case "etcd":
		runEtcd()
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kubelet":
		os.Exit(cli.Run(kubelet.NewKubeletCommand(context.Background())))
	case "kube-proxy":
		os.Exit(cli.Run(proxy.NewProxyCommand()))
	case "provisioner":
		runProvisioner()
	default:
		fmt.Fprintf(os.Stderr, "kcp: unknown component %q\n", name)
		os.Exit(2)
	}
}

// runEtcd runs an embedded single-member etcd on loopback. fsync is off: the state is
// throw-away test data and fsync dominates apiserver write latency on small machines.
func runEtcd() {
	dataDir := flag.String("data-dir", "", "etcd data directory (required)")
	client := flag.String("listen-client", "127.0.0.1:2379", "client listen address (loopback only)")
	peer := flag.String("listen-peer", "127.0.0.1:2380", "peer listen address (loopback only)")
	flag.Parse()
	if *dataDir == "" {
		log.Fatal("etcd: --data-dir is required")
	}
	cfg := embed.NewConfig()
	cfg.Dir = *dataDir
	cfg.Name = "testenv"
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "warn"
	cu := url.URL{Scheme: "http", Host: *client}
	pu := url.URL{Scheme: "http", Host: *peer}
	cfg.ListenClientUrls = []url.URL{cu}
	cfg.AdvertiseClientUrls = []url.URL{cu}
	cfg.ListenPeerUrls = []url.URL{pu}
	cfg.AdvertisePeerUrls = []url.URL{pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcd: start: %v", err)
	}
	defer e.Close()
	<-e.Server.ReadyNotify()
	log.Printf("etcd ready on %s", cu.String())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-sig:
	case err := <-e.Err():
		log.Fatalf("etcd: %v", err)
	}
}
