// Command cceemu serves the CCE v2 emulator for the local demo: it prints the endpoint URL on stdout and
// serves until SIGTERM or SIGINT.
//
//	cceemu -listen 127.0.0.1:0 -ak AK -sk SK -kubeconfig ~/.kube/local.yaml -phase-delay 300ms
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/internal/cceemu"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "cceemu:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done; main cancels ctx on SIGTERM or SIGINT.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cceemu", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to listen on")
	ak := fs.String("ak", "", "access key to accept (required)")
	sk := fs.String("sk", "", "secret key of -ak (required)")
	token := fs.String("sts-token", "", "if set, -ak is an STS key and requests must carry this session token")
	kubeconfig := fs.String("kubeconfig", "", "file whose YAML is returned as the kubeconfig of running clusters")
	phaseDelay := fs.Duration("phase-delay", 300*time.Millisecond, "time each phase step takes")
	versions := fs.String("k8s-versions", "", "comma-separated Kubernetes versions to accept (default: the built-in list)")
	quiet := fs.Bool("quiet", false, "do not log requests to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ak == "" || *sk == "" {
		return fmt.Errorf("-ak and -sk are required")
	}
	opts := cceemu.Options{
		Credentials: map[string]string{*ak: *sk},
		PhaseDelay:  *phaseDelay,
		Log:         stderr,
	}
	if *quiet {
		opts.Log = nil
	}
	if *token != "" {
		opts.STSTokens = map[string]string{*ak: *token}
	}
	if *versions != "" {
		opts.K8sVersions = strings.Split(*versions, ",")
	}
	if *kubeconfig != "" {
		b, err := os.ReadFile(*kubeconfig)
		if err != nil {
			return fmt.Errorf("read kubeconfig %q: %w", *kubeconfig, err)
		}
		opts.Kubeconfig = string(b)
	}

	s := cceemu.New(opts)
	ep, err := s.StartOn(*listen)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintln(stdout, ep)

	<-ctx.Done()
	return nil
}
