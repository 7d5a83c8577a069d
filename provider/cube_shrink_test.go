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

// TestWaitNewLayout_TransferUnreachable: shrinking a cube whose transfer cannot be asked
// (here: no transfer Service at all) keeps the removed shards and fails at the timeout,
// saying why. It used to delete them at once with a warning, so every key of a removed
// shard missed until the rebuild served.
func TestWaitNewLayout_TransferUnreachable(t *testing.T) {
	k := requireCluster(t)
	t.Parallel()
	ns := k.namespace(t)
	kc, err := kube.NewClient(k.cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := stack.Cube{Name: "gone", Namespace: ns, DonefileURL: "http://fs:8080/base.txt", Shards: 1}.Defaulted()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var diags diag.Diagnostics
	start := time.Now()
	if waitNewLayout(ctx, kc, c, "1700000000", &diags) {
		t.Fatal("the removed shards may go although the transfer could not be asked")
	}
	if took := time.Since(start); took < 4*time.Second {
		t.Fatalf("gave up after %v, before its timeout", took)
	}
	if !diags.HasError() {
		t.Fatalf("no error: %v", diags)
	}
	text := diags[0].Summary() + " " + diags[0].Detail()
	for _, want := range []string{"not seen serving in time", "could not be asked", "removed shards are kept"} {
		if !strings.Contains(text, want) {
			t.Errorf("the error does not say %q: %s", want, text)
		}
	}
}
