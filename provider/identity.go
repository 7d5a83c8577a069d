package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// Resource identity (Terraform 1.12 and later): what names the object a resource manages,
// stored beside its state, and what an import block's `identity` gives instead of an ID. A
// workload is its namespace and name, a namespace or queue its name, a cluster its CCE
// cluster ID or, adopted, its API server. Each identity attribute but the cluster's is the
// state attribute of the same name, so the identity is read off the state (identityFromState).

// namespacedIdentity is the identity of ctr_training_job, ctr_cube and ctr_serving.
var namespacedIdentity = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
	"namespace": identityschema.StringAttribute{OptionalForImport: true,
		Description: "Namespace of the resource's objects. Defaults to `" + stack.DefaultNamespace + "` at import."},
	"name": identityschema.StringAttribute{RequiredForImport: true, Description: "The resource's name."},
}}

// namedIdentity is the identity of the cluster-scoped ctr_namespace and ctr_queue.
var namedIdentity = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
	"name": identityschema.StringAttribute{RequiredForImport: true, Description: "The object's name."},
}}

// clusterIdentity is the identity of ctr_cluster.
var clusterIdentity = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
	"cluster_id": identityschema.StringAttribute{OptionalForImport: true,
		Description: "The CCE cluster's ID; null for an adopted cluster. Import by identity takes it."},
	"api_server": identityschema.StringAttribute{OptionalForImport: true,
		Description: "An adopted cluster's API server, `host:port`; null for a CCE cluster. An adopted cluster is imported by its " +
			"kubeconfig (`id = \"kubeconfig:PATH\"`), which the identity does not hold."},
}}

// identitySchema answers IdentitySchema with s.
func identitySchema(s identityschema.Schema) func(context.Context, resource.IdentitySchemaRequest, *resource.IdentitySchemaResponse) {
	return func(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
		resp.IdentitySchema = s
	}
}

// identityFromState sets each attribute of ident to the state's attribute of the same name.
// A state that is gone (a failed create saved nothing) sets nothing.
func identityFromState(ctx context.Context, state *tfsdk.State, ident *tfsdk.ResourceIdentity, diags *diag.Diagnostics) {
	if ident == nil || state.Raw.IsNull() {
		return
	}
	for name := range ident.Schema.GetAttributes() {
		var v types.String
		diags.Append(state.GetAttribute(ctx, path.Root(name), &v)...)
		diags.Append(ident.SetAttribute(ctx, path.Root(name), v)...)
	}
}

// readIdentity is identityFromState for Read: from the state read, or, when Read found the
// object gone and removed the resource, from the state it started from.
func readIdentity(ctx context.Context, prior tfsdk.State, state *tfsdk.State, ident *tfsdk.ResourceIdentity, diags *diag.Diagnostics) {
	if state.Raw.IsNull() {
		state = &prior
	}
	identityFromState(ctx, state, ident, diags)
}

// importedIdentity is an import by identity's attributes by name: ok false for an import by ID.
func importedIdentity(ctx context.Context, req resource.ImportStateRequest, diags *diag.Diagnostics) (map[string]string, bool) {
	if req.ID != "" || req.Identity == nil || req.Identity.Raw.IsFullyNull() {
		return nil, false // by ID (the framework gives an import by ID a null identity)
	}
	out := map[string]string{}
	for name := range req.Identity.Schema.GetAttributes() {
		var v types.String
		diags.Append(req.Identity.GetAttribute(ctx, path.Root(name), &v)...)
		out[name] = v.ValueString()
	}
	return out, true
}

// setClusterIdentity sets a cluster's identity from its state: the CCE cluster ID, or the
// API server of an adopted cluster, whose ID is "existing/<API server>" (adoptedID).
func setClusterIdentity(ctx context.Context, state *tfsdk.State, ident *tfsdk.ResourceIdentity, diags *diag.Diagnostics) {
	if ident == nil || state.Raw.IsNull() {
		return
	}
	var id, clusterID types.String
	diags.Append(state.GetAttribute(ctx, path.Root("id"), &id)...)
	diags.Append(state.GetAttribute(ctx, path.Root("cluster_id"), &clusterID)...)
	cce, server := types.StringNull(), types.StringNull()
	switch host, adopted := strings.CutPrefix(id.ValueString(), adoptedIDPrefix); {
	case clusterID.ValueString() != "":
		cce = clusterID
	case adopted:
		server = types.StringValue(host)
	default:
		// Imported from a kubeconfig and not read yet: the ID names the file, not the cluster.
		return
	}
	diags.Append(ident.SetAttribute(ctx, path.Root("cluster_id"), cce)...)
	diags.Append(ident.SetAttribute(ctx, path.Root("api_server"), server)...)
}
