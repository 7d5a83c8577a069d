package provider

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// readServing asks the transfer (through the API server's service proxy) what every replica
// serves, and sets served_version and serving_replicas from what the replicas report. When
// the transfer cannot be asked, served_version is "" and serving_replicas null. A shard whose
// replicas do not all serve the decided version is a warning: it shows in the plan.
func readServing(ctx context.Context, kc *kube.Client, c stack.Cube, m *cubeModel, diags *diag.Diagnostics) {
	m.ServedVersion, m.ServingReplicas, m.KeptVersions = types.StringValue(""), types.ListNull(types.Int64Type), types.ListNull(types.StringType)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := transferStatus(ctx, kc, c)
	if kube.IsForbidden(err) {
		diags.Append(statusNotReadable(fmt.Sprintf("Cube %s/%s", c.Namespace, c.Name), "served_version, serving_replicas and kept_versions", err))
		return
	}
	if err != nil {
		tflog.Warn(ctx, fmt.Sprintf("cube %s/%s: could not ask the transfer what the replicas serve: %s", c.Namespace, c.Name, err))
		return
	}
	st, err := stack.DecodeTransferStatus(body)
	if err != nil {
		tflog.Warn(ctx, fmt.Sprintf("cube %s/%s: %s", c.Namespace, c.Name, err))
		return
	}
	var warn string
	m.ServedVersion, m.ServingReplicas, warn = servingValues(st)
	if warn != "" {
		diags.Append(diagnostics.Warning("Cube Replicas Not Serving", fmt.Sprintf("Cube %s/%s: %s", c.Namespace, c.Name, warn), ""))
	}
	kept, d := types.ListValueFrom(ctx, types.StringType, append([]string{}, st.Kept...))
	diags.Append(d...)
	m.KeptVersions = kept
	if st.PinError != "" {
		diags.Append(diagnostics.Warning("Cube Pin Not Served", fmt.Sprintf("Cube %s/%s: the transfer reports: %s", c.Namespace, c.Name, st.PinError),
			"Set serve_version to one of kept_versions, or remove it to follow the donefile again."))
	}
	diags.Append(donefileWarnings(c, st)...)
}

const statusNotReadableSummary = "Status Not Readable"

// statusNotReadable is the warning when the API server refuses the provider's identity a
// status read through its proxy (kube.IsForbidden): which attributes stay empty, and the
// permission to grant (err says which).
func statusNotReadable(what, attrs string, err error) diag.Diagnostic {
	return diagnostics.Warning(statusNotReadableSummary, fmt.Sprintf("%s: its status cannot be read, so these are left empty: %s. %s", what, attrs, err),
		grantStatusReads("this namespace", stack.PodProxy, stack.ServiceProxy))
}

// grantStatusReads is what to do when the API server refuses status reads through the
// proxy subresources subs in namespace (a phrase: "this namespace").
func grantStatusReads(namespace string, subs ...string) string {
	return "Grant the provider's identity the RBAC guide's ClusterRole in " + namespace + ", or at least get on " + strings.Join(subs, " and ") + "."
}

// donefileWarnings are the plan's warnings about donefile lines the transfer does not roll
// out: a last line whose id does not grow, and lines that do not parse.
func donefileWarnings(c stack.Cube, st api.Status) diag.Diagnostics {
	var diags diag.Diagnostics
	if st.Skipped != "" {
		diags.Append(diagnostics.Warning("Cube Skips A Donefile Line", fmt.Sprintf("Cube %s/%s: the transfer reports: %s", c.Namespace, c.Name, st.Skipped),
			"Until a line with a larger id appears, no new model rolls out."))
	}
	if len(st.SkippedLines) > 0 {
		diags.Append(diagnostics.Warning("Cube Skips Donefile Lines", fmt.Sprintf("Cube %s/%s: the transfer cannot parse these donefile lines, and rolls none of them out: %s",
			c.Namespace, c.Name, strings.Join(st.SkippedLines, "; ")),
			"Each line is a JSON object with id, key and input, as the training job writes it; rewrite or remove these."))
	}
	return diags
}

// transferStatus GETs the transfer's status document (of a defaulted cube) through the API
// server's service proxy, so that Terraform needs no route into the cluster.
func transferStatus(ctx context.Context, kc *kube.Client, c stack.Cube) ([]byte, error) {
	return kc.ServiceProxyGet(ctx, c.Namespace, c.TransferService(), strconv.Itoa(int(c.TransferPort)), stack.TransferStatusPath)
}

// servingValues turns the transfer's status into served_version, serving_replicas and,
// when a version was rolled out but some replica does not serve it, a warning that says
// which and what the transfer does about it.
func servingValues(st api.Status) (types.String, types.List, string) {
	counts := make([]int64, len(st.Shards))
	for i, sh := range st.Shards {
		counts[i] = int64(sh.Serving)
	}
	list, _ := types.ListValueFrom(context.Background(), types.Int64Type, counts) // []int64 always converts
	if st.DecidedVersion == "" {
		return types.StringValue(st.ServedVersion), list, "" // no model rolled out yet
	}
	ref := st.Reference()
	var lines []string
	for _, sh := range st.Lagging() {
		var why []string
		for _, r := range sh.Replicas {
			if r.ServedVersion != ref {
				s := fmt.Sprintf("%s serves %q (%s", r.Addr, r.ServedVersion, r.State)
				if r.Error != "" {
					s += ": " + r.Error
				}
				why = append(why, s+")")
			}
		}
		lines = append(lines, fmt.Sprintf("shard %d: %d of %d replicas serve %q; %s", sh.Shard, sh.Serving, len(sh.Replicas),
			ref, strings.Join(why, "; ")))
	}
	if len(lines) == 0 {
		return types.StringValue(st.ServedVersion), list, ""
	}
	what := fmt.Sprintf("the transfer rolled out version %q, but not every replica serves it:\n  %s\n", st.DecidedVersion, strings.Join(lines, "\n  "))
	if st.ServedVersion == "" {
		what += "A shard with no replica serving it fails every lookup of its keys. "
	}
	what += "The transfer prepares and switches such replicas by itself (every --heal-interval, 5 s by default) once they answer; " +
		"if this persists, look at those pods (kubectl describe / logs) and at the transfer's log."
	return types.StringValue(st.ServedVersion), list, what
}
