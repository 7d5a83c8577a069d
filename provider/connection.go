package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	pschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// connectionModel is the `kubernetes` object: the provider's default connection, each
// workload resource's own connection, and what ctr_cluster exports.
type connectionModel struct {
	ConfigPath           types.String `tfsdk:"config_path"`
	ConfigContext        types.String `tfsdk:"config_context"`
	Host                 types.String `tfsdk:"host"`
	Token                types.String `tfsdk:"token"`
	ClientCertificate    types.String `tfsdk:"client_certificate"`
	ClientKey            types.String `tfsdk:"client_key"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	Insecure             types.Bool   `tfsdk:"insecure"`
}

var connectionAttrTypes = map[string]attr.Type{
	"config_path":            types.StringType,
	"config_context":         types.StringType,
	"host":                   types.StringType,
	"token":                  types.StringType,
	"client_certificate":     types.StringType,
	"client_key":             types.StringType,
	"cluster_ca_certificate": types.StringType,
	"insecure":               types.BoolType,
}

var connectionDescriptions = map[string]string{
	"config_path":            "Path to a kubeconfig file. Defaults to the `KUBECONFIG` environment variable, else `~/.kube/config`, when no `host` is set. Conflicts with `host`.",
	"config_context":         "Context of the kubeconfig to use. Defaults to the kubeconfig's current context. Conflicts with `host`.",
	"host":                   "API server URL, e.g. `https://10.0.0.2:6443`. With `host`, credentials come from `token` or the client certificate instead of a kubeconfig.",
	"token":                  "Bearer token for the API server.",
	"client_certificate":     "PEM-encoded client certificate for TLS client authentication; needs `client_key`.",
	"client_key":             "PEM-encoded private key of `client_certificate`, which it needs.",
	"cluster_ca_certificate": "PEM-encoded certificate authority that signed the API server's certificate.",
	"insecure":               "Skip verification of the API server's certificate. For test clusters only. Defaults to `false`.",
}

var connectionSensitive = map[string]bool{"token": true, "client_key": true}

// connectionValidators refuse settings that do not go together, which RESTConfig would
// otherwise resolve without a word (host winning over the kubeconfig).
func connectionValidators(name string) []validator.String {
	sibling := func(n string) path.Expression { return path.MatchRelative().AtParent().AtName(n) }
	switch name {
	case "config_path", "config_context":
		return []validator.String{stringvalidator.ConflictsWith(sibling("host"))}
	case "host":
		return []validator.String{stringvalidator.LengthAtLeast(1)}
	case "client_certificate":
		return []validator.String{stringvalidator.AlsoRequires(sibling("client_key"))}
	case "client_key":
		return []validator.String{stringvalidator.AlsoRequires(sibling("client_certificate"))}
	}
	return nil
}

// nonEmptyConnection refuses `kubernetes = {}`, which says nothing: leave it out to use the
// provider's connection.
type nonEmptyConnection struct{}

func (nonEmptyConnection) Description(context.Context) string {
	return "sets at least one attribute"
}
func (v nonEmptyConnection) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (nonEmptyConnection) ValidateObject(_ context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for _, v := range req.ConfigValue.Attributes() {
		if !v.IsNull() {
			return
		}
	}
	resp.Diagnostics.Append(diagnostics.InvalidSetting("Connection", req.Path,
		"sets nothing: give config_path (and config_context), or host with token or client_certificate and client_key; "+
			"or leave kubernetes out to use the provider's connection (else KUBECONFIG or ~/.kube/config)."))
}

const connectionDescription = "How to reach the Kubernetes cluster. Either a kubeconfig (`config_path`, `config_context`) " +
	"or `host` with `token` or a client certificate. "

func connectionProviderAttribute() pschema.SingleNestedAttribute {
	attrs := map[string]pschema.Attribute{}
	for name := range connectionAttrTypes {
		if name == "insecure" {
			attrs[name] = pschema.BoolAttribute{Optional: true, MarkdownDescription: connectionDescriptions[name]}
			continue
		}
		attrs[name] = pschema.StringAttribute{Optional: true, Sensitive: connectionSensitive[name], MarkdownDescription: connectionDescriptions[name],
			Validators: connectionValidators(name)}
	}
	return pschema.SingleNestedAttribute{
		Optional: true, Validators: []validator.Object{nonEmptyConnection{}},
		MarkdownDescription: connectionDescription + "The default for every resource that sets no `kubernetes` of its own. " +
			"When unset, the `KUBECONFIG` environment variable or `~/.kube/config` is used.",
		Attributes: attrs,
	}
}

func connectionResourceAttribute() rschema.SingleNestedAttribute {
	attrs := map[string]rschema.Attribute{}
	for name := range connectionAttrTypes {
		if name == "insecure" {
			attrs[name] = rschema.BoolAttribute{Optional: true, MarkdownDescription: connectionDescriptions[name]}
			continue
		}
		attrs[name] = rschema.StringAttribute{Optional: true, Sensitive: connectionSensitive[name], MarkdownDescription: connectionDescriptions[name],
			Validators: connectionValidators(name)}
	}
	return rschema.SingleNestedAttribute{
		Optional: true, Validators: []validator.Object{nonEmptyConnection{}},
		MarkdownDescription: connectionDescription + "Overrides the provider's `kubernetes` for this resource. Because it is " +
			"a resource attribute, it may come from a cluster created in the same apply " +
			"(`kubernetes = ctr_cluster.this.kubernetes`).",
		Attributes: attrs,
	}
}

// connection picks the resource's own connection, else the provider's default.
func connection(ctx context.Context, own types.Object, data *providerData) (kube.Connection, diag.Diagnostics) {
	obj := own
	if obj.IsNull() && data != nil {
		obj = data.kubernetes
	}
	if obj.IsNull() || obj.IsUnknown() {
		return kube.Connection{}, nil
	}
	var m connectionModel
	diags := obj.As(ctx, &m, basetypes.ObjectAsOptions{})
	return kube.Connection{
		ConfigPath:           m.ConfigPath.ValueString(),
		ConfigContext:        m.ConfigContext.ValueString(),
		Host:                 m.Host.ValueString(),
		Token:                m.Token.ValueString(),
		ClientCertificate:    m.ClientCertificate.ValueString(),
		ClientKey:            m.ClientKey.ValueString(),
		ClusterCACertificate: m.ClusterCACertificate.ValueString(),
		Insecure:             m.Insecure.ValueBool(),
	}, diags
}

// kubeClient connects for one operation and sends the client's action lines to the
// Terraform log (TF_LOG=INFO shows them).
func kubeClient(ctx context.Context, own types.Object, data *providerData) (*kube.Client, diag.Diagnostics) {
	conn, diags := connection(ctx, own, data)
	if diags.HasError() {
		return nil, diags
	}
	cfg, err := conn.RESTConfig()
	if err != nil {
		diags.Append(diagnostics.Failed("Kubernetes Connection Error", "Could not configure the connection to the cluster", "", err))
		return nil, diags
	}
	c, err := kube.NewClient(cfg)
	if err != nil {
		diags.Append(diagnostics.Failed("Kubernetes Connection Error", "Could not create a client for "+cfg.Host, "", err))
		return nil, diags
	}
	c.Log = func(msg string) { tflog.Info(ctx, msg) }
	return c, diags
}
