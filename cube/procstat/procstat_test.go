package procstat

import (
	"os"
	"testing"
)

func TestKiB_ThisProcess(t *testing.T) {
	rss, err := KiB(os.Getpid(), "VmRSS")
	if err != nil || rss <= 0 {
		t.Fatalf("VmRSS %d KiB, %v", rss, err)
	}
	hwm, err := KiB(os.Getpid(), "VmHWM")
	if err != nil || hwm < rss {
		t.Fatalf("VmHWM %d KiB (VmRSS %d), %v", hwm, rss, err)
	}
	if _, err := KiB(os.Getpid(), "NoSuchField"); err == nil {
		t.Fatal("a field the file does not have is an error")
	}
}

func TestMemAvailable(t *testing.T) {
	avail, err := MemAvailable()
	total, err2 := fieldKiB("/proc/meminfo", "MemTotal")
	if err != nil || err2 != nil || avail <= 0 || avail > total<<10 {
		t.Fatalf("MemAvailable %d bytes of %d KiB: %v %v", avail, total, err, err2)
	}
}
