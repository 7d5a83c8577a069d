package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// clusterPlan plans ctr_cluster through the provider's protocol server, as Terraform does:
// from the prior state to the configuration (the proposed new state is the prior state with
// the configuration's values). It returns the attributes that force replacement and the
// warnings.
func clusterPlan(t *testing.T, prior, config map[string]any) (replace []string, warnings []*tfprotov6.Diagnostic) {
	t.Helper()
	ctx := context.Background()
	server, err := providerserver.NewProtocol6WithError(New(testVersion)())()
	if err != nil {
		t.Fatal(err)
	}
	schemas, err := server.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	typ := schemas.ResourceSchemas["ctr_cluster"].ValueType()
	value := func(m map[string]any) *tfprotov6.DynamicValue {
		v, err := tfValue(typ, m)
		if err != nil {
			t.Fatal(err)
		}
		dv, err := tfprotov6.NewDynamicValue(typ, v)
		if err != nil {
			t.Fatal(err)
		}
		return &dv
	}
	resp, err := server.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{TypeName: "ctr_cluster",
		PriorState: value(prior), ProposedNewState: value(merged(prior, config)), Config: value(config)})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		switch d.Severity {
		case tfprotov6.DiagnosticSeverityError:
			t.Fatalf("plan failed: %s: %s", d.Summary, d.Detail)
		case tfprotov6.DiagnosticSeverityWarning:
			warnings = append(warnings, d)
		}
	}
	for _, p := range resp.RequiresReplace {
		replace = append(replace, attributePathString(p))
	}
	return replace, warnings
}

// merged is a over b: b's values, and a's where b has none (computed values kept from the
// prior state, as Terraform proposes them).
func merged(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		am, aok := a[k].(map[string]any)
		bm, bok := v.(map[string]any)
		if aok && bok {
			out[k] = merged(am, bm)
		} else {
			out[k] = v
		}
	}
	return out
}

func attributePathString(p *tftypes.AttributePath) string {
	var parts []string
	for _, s := range p.Steps() {
		if n, ok := s.(tftypes.AttributeName); ok {
			parts = append(parts, string(n))
		}
	}
	return strings.Join(parts, ".")
}

// cceClusterConfig is a CCE cluster's configuration, changed by the given cce attributes.
func cceClusterConfig(cce map[string]any) map[string]any {
	c := map[string]any{"name": "ctr-prod", "k8s_version": "1.30.1", "vpc_id": "vpc-1", "description": "ads",
		"worker_pool": map[string]any{"replicas": 2, "machine_spec": "bcc.g5.c8m32", "subnet_id": "sbn-1"}}
	for k, v := range cce {
		c[k] = v
	}
	return map[string]any{"cce": c}
}

// cceClusterState is what the state holds of cceClusterConfig(nil) once created.
func cceClusterState() map[string]any {
	s := merged(cceClusterConfig(nil), map[string]any{
		"id": "cce-abc123", "cluster_id": "cce-abc123", "phase": "running", "kubeconfig": "apiVersion: v1",
		"volcano_state": "installed", "volcano_version": "v1.14.1", "volcano_objects": []any{}, "volcano_adopted_objects": []any{}, "volcano_drift": []any{},
		"cce": map[string]any{"runtime": "containerd", "kubeconfig_type": "vpc", "delete_resource": true, "delete_cds_snapshot": true,
			"worker_pool": map[string]any{"id": "ig-1", "name": "workers", "root_disk_size": 100}},
	})
	return s
}

// TestCluster_ReplacementWarns: a change that replaces a CCE cluster plans a warning that
// names every attribute forcing it, the cluster, and what goes with it; a change in place
// plans none.
func TestCluster_ReplacementWarns(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		change  map[string]any
		replace []string
	}{
		{"description", map[string]any{"description": "ads and search"}, []string{"cce.description"}},
		{"k8s_version and vpc", map[string]any{"k8s_version": "1.31.0", "vpc_id": "vpc-2"}, []string{"cce.k8s_version", "cce.vpc_id"}},
		{"machine spec", map[string]any{"worker_pool": map[string]any{"replicas": 2, "machine_spec": "bcc.g5.c16m64", "subnet_id": "sbn-1"}},
			[]string{"cce.worker_pool.machine_spec"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			replace, warnings := clusterPlan(t, cceClusterState(), cceClusterConfig(c.change))
			for _, r := range c.replace {
				if !strings.Contains(strings.Join(replace, " "), r) {
					t.Errorf("Terraform is not told that %s forces replacement: %v", r, replace)
				}
			}
			if len(warnings) != 1 {
				t.Fatalf("want one warning, got %d: %v", len(warnings), warnings)
			}
			w := warnings[0]
			text := w.Summary + ": " + w.Detail
			for _, want := range append(c.replace, "CCE Cluster Will Be Replaced", "CCE cluster cce-abc123 (ctr-prod)",
				"Everything on the cluster goes with it", "every training job, cube and serving", "volume claims", "prevent_destroy") {
				if !strings.Contains(text, want) {
					t.Errorf("the warning does not say %q: %s", want, text)
				}
			}
		})
	}
	t.Run("in place", func(t *testing.T) {
		change := map[string]any{"worker_pool": map[string]any{"replicas": 3, "machine_spec": "bcc.g5.c8m32", "subnet_id": "sbn-1"}}
		replace, warnings := clusterPlan(t, cceClusterState(), cceClusterConfig(change))
		if len(replace) != 0 || len(warnings) != 0 {
			t.Errorf("scaling the pool replaces %v and warns %v", replace, warnings)
		}
	})
}
