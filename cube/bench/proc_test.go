package bench

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
)

// A small child of a large benchmark process is reported at its own size: the figure
// getrusage gives it there is the parent's.
func TestRunPeakRSS_IsTheChildsOwn(t *testing.T) {
	const parentMiB = 256
	ballast := make([]byte, parentMiB<<20)
	for i := range ballast { // touch every page: resident, not just reserved
		ballast[i] = 1
	}
	cmd := exec.Command("sleep", "0.3")
	peak, err := RunPeakRSS(cmd)
	runtime.KeepAlive(ballast)
	if err != nil {
		t.Fatal(err)
	}
	if peak <= 0 || peak > 32<<10 {
		t.Fatalf("sleep's peak RSS measured as %d KiB, want a few MiB", peak)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	t.Logf("sleep: peak RSS %d KiB sampled; getrusage said %d KiB (the parent holds %d MiB)", peak, ru.Maxrss, parentMiB)
}
