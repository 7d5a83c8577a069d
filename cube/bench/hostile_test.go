package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
)

func TestMain(m *testing.M) { cubetest.Main(m, nil) }

// TestHostileSmoke runs a small "bench hostile" against a real server
// process: both phases serve every request and the report has its rows.
func TestHostileSmoke(t *testing.T) {
	bin := cubetest.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := RunHostile(ctx, HostileOptions{Conns: 80, Keys: 5000, Batch: 100, Duration: 300 * time.Millisecond, CubeBinary: bin}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"p50 latency", "p99 latency", "VmHWM", "with 80 hostile", "20 half-sent baidu_std headers", "20 64 MiB-declared"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
