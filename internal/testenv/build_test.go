package testenv

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCachedConcurrentBuilds: two builds of the same thing at once (two checkouts'
// make test) both succeed; the second waits for the first and reuses what it built.
func TestCachedConcurrentBuilds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kcp-v0")
	var builds atomic.Int32
	build := func(tmp string) error {
		builds.Add(1)
		time.Sleep(300 * time.Millisecond)
		return os.WriteFile(filepath.Join(tmp, "kcp"), []byte("binary"), 0o755)
	}
	var wg sync.WaitGroup
	logs := make([]*bytes.Buffer, 2)
	errs := make([]error, 2)
	for i := range 2 {
		logs[i] = &bytes.Buffer{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = (&Builder{Log: logs[i]}).cached(context.Background(), dir, "kcp", build)
		}()
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("build %d: %v\n%s", i, err, logs[i])
		}
	}
	if builds.Load() != 1 {
		t.Fatalf("built %d times, want once", builds.Load())
	}
	if !strings.Contains(logs[1].String(), "waiting") || !strings.Contains(logs[1].String(), "built by the build we waited for") {
		t.Fatalf("the second build did not say it waited:\n%s", logs[1])
	}
	if b, err := os.ReadFile(filepath.Join(dir, "kcp")); err != nil || string(b) != "binary" {
		t.Fatalf("cached result %q, %v", b, err)
	}
}
