package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPush: `build-image --push` puts the image it built under <repository>:<version> in the
// registry (go-containerregistry's own, on loopback), with the digest of the layout it wrote.
func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	dir := t.TempDir()
	// The image needs a static linux/amd64 ELF; a tiny one builds in a second.
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "go.mod"), []byte("module tiny\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
	bin := filepath.Join(dir, "cube")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir, build.Env = src, append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build a tiny binary: %v\n%s", err, b)
	}
	repo := u.Host + "/elasticctr/cube"
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--binary", bin, "--version", "1.2.3", "--repository", repo,
		"--out", filepath.Join(dir, "out"), "--push"}, &out, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	tag, _ := name.NewTag(repo + ":1.2.3")
	desc, err := remote.Get(tag)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "pushed "+tag.String()+"@"+desc.Digest.String()) {
		t.Fatalf("registry serves %s; output:\n%s", desc.Digest, out.String())
	}
}
