package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// The steps every workload resource (ctr_cube, ctr_serving) shares with ctr_training_job:
// apply with pruning, read back with drift projection, delete everything owned.

// applySet server-side applies the set and prunes owned objects of kinds it no longer renders.
func applySet(ctx context.Context, c *kube.Client, set stack.Set, namespace, owner string, kinds []schema.GroupVersionKind, what string, diags *diag.Diagnostics) bool {
	if _, err := c.Apply(ctx, set); err != nil {
		diags.AddError("Apply "+what+" Error", fmt.Sprintf("Could not apply the objects of %s: %s", what, err))
		return false
	}
	if _, err := c.Prune(ctx, namespace, owner, kinds, set); err != nil {
		diags.AddError("Apply "+what+" Error", "Could not remove objects that are no longer rendered: "+err.Error())
		return false
	}
	return true
}

// readSet reads every object of the set back, projected onto the fields we set, as the
// `manifests` value. live holds the objects that exist; none existing means the resource is gone.
func readSet(ctx context.Context, c *kube.Client, set stack.Set, diags *diag.Diagnostics) (types.Map, map[string]*unstructured.Unstructured) {
	manifests := map[string]string{}
	live := map[string]*unstructured.Unstructured{}
	for _, o := range set {
		u, err := c.Get(ctx, o.Object)
		if err != nil {
			diags.AddError("Read Error", err.Error())
			return types.MapNull(types.StringType), nil
		}
		if u == nil {
			continue
		}
		y, err := stack.YAML(kube.Project(o.Object, u))
		if err != nil {
			diags.AddError("Read Error", err.Error())
			return types.MapNull(types.StringType), nil
		}
		manifests[o.Key] = y
		live[o.Key] = u
	}
	mv, d := types.MapValueFrom(ctx, types.StringType, manifests)
	diags.Append(d...)
	return mv, live
}

// manifestsValue renders a set's manifests for the plan.
func manifestsValue(ctx context.Context, set stack.Set, diags *diag.Diagnostics) types.Map {
	m, err := set.Manifests()
	if err != nil {
		diags.AddError("Render Error", err.Error())
		return types.MapUnknown(types.StringType)
	}
	mv, d := types.MapValueFrom(ctx, types.StringType, m)
	diags.Append(d...)
	return mv
}

// settingErrors reports stack's FieldErrors, each at its attribute.
func settingErrors(kind string, errs stack.FieldErrors) diag.Diagnostics {
	var diags diag.Diagnostics
	for _, e := range errs {
		diags.Append(diagnostics.InvalidSetting(kind, fieldPath(e.Path), e.Detail))
	}
	return diags
}

// renderError reports a rendering that failed: settings errors at their attributes (found
// at plan time when validation had to wait for values known only then), anything else as is.
func renderError(kind string, err error) diag.Diagnostics {
	var errs stack.FieldErrors
	if errors.As(err, &errs) {
		return settingErrors(kind, errs)
	}
	return diag.Diagnostics{diagnostics.Failed("Render "+kind+" Error", "Could not render the Kubernetes objects", "", err)}
}

// importByNamespaceName starts the import of a workload resource from "NAMESPACE/NAME": only
// id, namespace and name are set, and Read, seeing no other settings, reads them from the
// cluster. An ID that names no valid object is refused here, before anything is read.
func importByNamespaceName(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ns, name, err := parseNamespaceName(req.ID)
	if err != nil {
		resp.Diagnostics.Append(diagnostics.InvalidImportID(req.ID, "NAMESPACE/NAME, e.g. default/ctr-demo ("+err.Error()+")"))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}

// parseNamespaceName splits an import ID, and says what is wrong with one that names no object.
func parseNamespaceName(id string) (ns, name string, err error) {
	parts := strings.Split(id, "/")
	switch {
	case len(parts) != 2:
		return "", "", fmt.Errorf("%d parts separated by /", len(parts))
	case !stack.NamespacePattern.MatchString(parts[0]):
		return "", "", fmt.Errorf("the namespace %q %s", parts[0], stack.NamespaceRule)
	case !stack.NamePattern.MatchString(parts[1]):
		return "", "", fmt.Errorf("the name %q %s", parts[1], stack.NameRule)
	}
	return parts[0], parts[1], nil
}
