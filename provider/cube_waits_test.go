package provider

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// TestAccCubeWaitsStopWhenStatusIsForbidden: an identity that may not read the transfer's
// status through the service proxy is refused at once, and no wait can change that, so the
// cube's waits (a pinned version, a shrink's new layout) fail at once, saying what to grant,
// instead of polling until their timeout.
func TestAccCubeWaitsStopWhenStatusIsForbidden(t *testing.T) {
	t.Parallel()
	k, ns, name := cubeTest(t)
	kc, err := kube.NewClient(clientsFor(t, k.workloadsKubeconfig(t, ns, stack.ServiceProxy)).cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := stack.Cube{Namespace: ns, Name: name, Shards: 1, TransferPort: stack.DefaultTransferPort}
	const timeout = time.Minute
	for what, run := range map[string]func(context.Context, *diag.Diagnostics) bool{
		"pinned": func(ctx context.Context, d *diag.Diagnostics) bool { return waitPinned(ctx, kc, c, "1700000000", d) },
		"layout": func(ctx context.Context, d *diag.Diagnostics) bool { return waitNewLayout(ctx, kc, c, "1700000000", d) },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		var diags diag.Diagnostics
		start := time.Now()
		ok := run(ctx, &diags)
		cancel()
		if took := time.Since(start); took > timeout/4 {
			t.Errorf("%s: the wait took %s of its %s", what, took, timeout)
		}
		if ok || !diags.HasError() {
			t.Fatalf("%s: ok %v, diagnostics %v", what, ok, diags)
		}
		got := diags[0].Summary() + ": " + diags[0].Detail()
		if !strings.Contains(got, "services/proxy") || !strings.Contains(got, stack.WorkloadsRoleName) {
			t.Errorf("%s: the error does not say what to grant: %s", what, got)
		}
	}
}
