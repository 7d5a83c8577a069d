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
// process: every phase serves every request, every amplifying request is
// refused, and the report has its rows.
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
	for _, want := range []string{"p50 latency", "p99 latency", "fresh client", "peak RSS MiB", "80 hostile connections",
		"20 half-sent baidu_std headers", "20 64 MiB-declared", "refused with error 1003, 0 answered in full", "80 connections from 1 loopback addresses",
		"ratio p99_byte_amplification_vs_alone=", "ratio p99_amplification_at_share_" + amplifyShare + "_vs_alone=", "ratio p99_slot_holding_vs_alone="} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
