package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTiedProcessesDieWithTheirStarter: a process an UpInProcess environment starts is
// killed by the kernel when the process that started it dies without stopping it (a test
// killed before its Cleanup); one an Up environment starts outlives it, as `testenv up`
// needs. The starter is this test binary run again, killed with SIGKILL.
func TestTiedProcessesDieWithTheirStarter(t *testing.T) {
	if dir := os.Getenv("CTR_TESTENV_STARTER_DIR"); dir != "" {
		e := &Env{Dir: dir, tied: os.Getenv("CTR_TESTENV_STARTER_TIED") == "1"}
		if err := e.spawn("sleeper", "sleep", "300"); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		select {} // until killed
	}
	for _, tied := range []bool{true, false} {
		t.Run(fmt.Sprintf("tied=%v", tied), func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range []string{"pids", "logs"} {
				if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			starter := exec.Command(os.Args[0], "-test.run=^TestTiedProcessesDieWithTheirStarter$")
			starter.Env = append(os.Environ(), "CTR_TESTENV_STARTER_DIR="+dir, "CTR_TESTENV_STARTER_TIED="+map[bool]string{true: "1"}[tied])
			if err := starter.Start(); err != nil {
				t.Fatal(err)
			}
			var pid int
			for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					_ = starter.Process.Kill()
					t.Fatal("the starter did not start the sleeper within 30 s")
				}
				if b, err := os.ReadFile(filepath.Join(dir, "pids", "sleeper")); err == nil && strings.HasSuffix(string(b), "\n") {
					pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				}
			}
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			if !alive(pid) {
				t.Fatalf("the sleeper (pid %d) is not running", pid)
			}
			_ = starter.Process.Kill()
			_ = starter.Wait()
			gone := false
			for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && !gone; time.Sleep(20 * time.Millisecond) {
				gone = !alive(pid)
			}
			if gone != tied {
				t.Fatalf("tied %v: the sleeper gone after its starter was killed: %v", tied, gone)
			}
		})
	}
}
