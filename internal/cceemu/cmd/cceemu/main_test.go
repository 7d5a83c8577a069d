package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ccev2 "github.com/baidubce/bce-sdk-go/services/cce/v2"
)

func TestRun_PrintsEndpointServesAndStops(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-ak", "AK", "-sk", "SK", "-kubeconfig", kc, "-phase-delay", "10ms", "-quiet"}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("read endpoint: %v", err)
	}
	ep := strings.TrimSpace(line)
	if !strings.HasPrefix(ep, "http://127.0.0.1:") {
		t.Fatalf("endpoint %q", ep)
	}
	c, err := ccev2.NewClient("AK", "SK", ep)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListClusters(&ccev2.ListClustersArgs{PageNum: 1, PageSize: 10}); err != nil {
		t.Fatalf("list against the command: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not stop")
	}
}

func TestRun_RejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{}, {"-ak", "A"}, {"-ak", "A", "-sk", "B", "-listen", "0.0.0.0:0"}, {"-ak", "A", "-sk", "B", "-kubeconfig", "/nonexistent"}} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
