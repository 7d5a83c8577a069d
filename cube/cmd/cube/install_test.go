package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elasticctr/terraform-provider-ctr/cube/servingstandin"
)

// TestInstall_CopiesTheBinaryThatThenRuns: what a serving pod's init container does. The
// copy is the same bytes, executable, and runs; the stand-in link starts the stand-in (it
// answers Paddle's flags, not cube's commands); a second install over the first works (a
// restarted init container).
func TestInstall_CopiesTheBinaryThatThenRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")
	for range 2 {
		cube(t, "install", dir)
	}
	want, err := os.ReadFile(cubeBin)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "cube"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the installed binary differs from the running one (%d vs %d bytes)", len(got), len(want))
	}
	if out, err := exec.Command(filepath.Join(dir, "cube"), "version").Output(); err != nil || !strings.Contains(string(out), version) {
		t.Errorf("installed cube version: %q, %v", out, err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(dir, servingstandin.BinaryName), "-no_such_flag=1")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("the stand-in link with an unknown flag: %v (gflags exits 1); stderr %s", err, stderr.String())
	}
	if r := run([]string{"install"}, &bytes.Buffer{}, &bytes.Buffer{}); r != 2 {
		t.Errorf("install without DIR: status %d, want 2", r)
	}
}
