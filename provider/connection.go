package provider

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
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

// The `kubernetes` connection object, with the attributes (and, on the provider, the
// environment variables) of the hashicorp kubernetes provider. It appears three times:
//
//   - on the provider: the connection every resource uses. Provider configuration is never
//     stored in state and is evaluated afresh on every plan, apply, refresh and destroy, so a
//     rotated token or a moved kubeconfig changes nothing in any plan, and refresh and destroy
//     use today's credentials. It may depend on a cluster created in the same apply.
//   - on each workload resource (and to adopt a cluster on ctr_cluster): an override,
//     which Terraform stores in state like any resource argument and hands back unchanged to
//     refresh and destroy. It therefore takes only credential *sources* — a kubeconfig, or an
//     exec plugin — that yield current credentials whenever they are used; static credentials
//     (token, client certificate and key) are refused there.
//   - computed on ctr_cluster with `cce`: the new cluster's connection, to configure the
//     provider (`provider "ctr" { kubernetes = ctr_cluster.this.kubernetes }`).

// connectionModel is the `kubernetes` object.
type connectionModel struct {
	ConfigPath            types.String `tfsdk:"config_path"`
	ConfigPaths           types.List   `tfsdk:"config_paths"`
	ConfigContext         types.String `tfsdk:"config_context"`
	ConfigContextAuthInfo types.String `tfsdk:"config_context_auth_info"`
	ConfigContextCluster  types.String `tfsdk:"config_context_cluster"`
	Host                  types.String `tfsdk:"host"`
	Token                 types.String `tfsdk:"token"`
	ClientCertificate     types.String `tfsdk:"client_certificate"`
	ClientKey             types.String `tfsdk:"client_key"`
	ClusterCACertificate  types.String `tfsdk:"cluster_ca_certificate"`
	Insecure              types.Bool   `tfsdk:"insecure"`
	TLSServerName         types.String `tfsdk:"tls_server_name"`
	ProxyURL              types.String `tfsdk:"proxy_url"`
	Exec                  *execModel   `tfsdk:"exec"`
}

type execModel struct {
	APIVersion types.String `tfsdk:"api_version"`
	Command    types.String `tfsdk:"command"`
	Args       types.List   `tfsdk:"args"`
	Env        types.Map    `tfsdk:"env"`
}

var execAttrTypes = map[string]attr.Type{
	"api_version": types.StringType,
	"command":     types.StringType,
	"args":        types.ListType{ElemType: types.StringType},
	"env":         types.MapType{ElemType: types.StringType},
}

var connectionAttrTypes = map[string]attr.Type{
	"config_path":              types.StringType,
	"config_paths":             types.ListType{ElemType: types.StringType},
	"config_context":           types.StringType,
	"config_context_auth_info": types.StringType,
	"config_context_cluster":   types.StringType,
	"host":                     types.StringType,
	"token":                    types.StringType,
	"client_certificate":       types.StringType,
	"client_key":               types.StringType,
	"cluster_ca_certificate":   types.StringType,
	"insecure":                 types.BoolType,
	"tls_server_name":          types.StringType,
	"proxy_url":                types.StringType,
	"exec":                     types.ObjectType{AttrTypes: execAttrTypes},
}

// connectionEnv are the environment variables the provider's connection reads for the
// attributes its configuration leaves unset: the kubernetes provider's names.
var connectionEnv = map[string]string{
	"config_path":              "KUBE_CONFIG_PATH",
	"config_paths":             "KUBE_CONFIG_PATHS",
	"config_context":           "KUBE_CTX",
	"config_context_auth_info": "KUBE_CTX_AUTH_INFO",
	"config_context_cluster":   "KUBE_CTX_CLUSTER",
	"host":                     "KUBE_HOST",
	"token":                    "KUBE_TOKEN",
	"client_certificate":       "KUBE_CLIENT_CERT_DATA",
	"client_key":               "KUBE_CLIENT_KEY_DATA",
	"cluster_ca_certificate":   "KUBE_CLUSTER_CA_CERT_DATA",
	"insecure":                 "KUBE_INSECURE",
	"tls_server_name":          "KUBE_TLS_SERVER_NAME",
	"proxy_url":                "KUBE_PROXY_URL",
}

var connectionDescriptions = map[string]string{
	"config_path": "Path to a kubeconfig file; a leading `~` is the home directory. Conflicts with `config_paths`.",
	"config_paths": "Kubeconfig files merged as kubectl merges `KUBECONFIG` (the first file that sets a value wins; " +
		"missing files are skipped). Conflicts with `config_path`.",
	"config_context":           "Context of the kubeconfig to use instead of its `current-context`.",
	"config_context_auth_info": "Kubeconfig user to use instead of the context's (kubectl's `--user`).",
	"config_context_cluster":   "Kubeconfig cluster to use instead of the context's (kubectl's `--cluster`).",
	"host": "API server URL, e.g. `https://10.0.0.2:6443`; overrides the kubeconfig's. Without a kubeconfig, credentials come " +
		"from `token`, the client certificate, or `exec`.",
	"token":                  "Bearer token.",
	"client_certificate":     "PEM-encoded client certificate for TLS client authentication; needs `client_key`.",
	"client_key":             "PEM-encoded private key of `client_certificate`, which it needs.",
	"cluster_ca_certificate": "PEM-encoded certificate authority that signed the API server's certificate.",
	"insecure":               "Skip verification of the API server's certificate. For test clusters only.",
	"tls_server_name":        "Server name to verify the API server's certificate against (and to send as SNI), when it differs from `host`.",
	"proxy_url":              "Proxy for every request to the API server: an `http://`, `https://` or `socks5://` URL.",
	"exec": "A client-go credential plugin: a command that prints an `ExecCredential`, run whenever a token is needed " +
		"and again when it expires (`aws eks get-token`, `gke-gcloud-auth-plugin`, `kubelogin`). Conflicts with `token` " +
		"and `client_certificate`.",
}

var execDescriptions = map[string]string{
	"api_version": "`client.authentication.k8s.io/v1` or `client.authentication.k8s.io/v1beta1`, as the plugin speaks.",
	"command":     "The plugin's executable, looked up on `PATH` unless it is a path.",
	"args":        "Arguments of the command.",
	"env":         "Environment variables added to Terraform's for the command. Kept in state where the connection is a resource's: no secrets here.",
}

// staticCredentials are the attributes a resource's own connection refuses (see above).
var staticCredentials = []string{"token", "client_certificate", "client_key"}

var connectionSensitive = map[string]bool{"token": true, "client_key": true}

// connectionValidators are the checks shared by every `kubernetes` object.
func connectionValidators(name string) []validator.String {
	sibling := func(n string) path.Expression { return path.MatchRelative().AtParent().AtName(n) }
	switch name {
	case "config_path":
		return []validator.String{stringvalidator.LengthAtLeast(1), stringvalidator.ConflictsWith(sibling("config_paths"))}
	case "host":
		return []validator.String{stringvalidator.LengthAtLeast(1)}
	case "client_certificate", "client_key":
		return []validator.String{certificatePair{}}
	case "proxy_url":
		return []validator.String{stringvalidator.RegexMatches(proxyURLPattern, "must be an http://, https:// or socks5:// URL")}
	}
	return nil
}

// execValidators are the provider's exec's: another credential beside it is refused. A
// resource's own connection refuses those credentials themselves, so its exec needs none.
var execValidators = []validator.Object{objectvalidator.ConflictsWith(
	path.MatchRelative().AtParent().AtName("token"), path.MatchRelative().AtParent().AtName("client_certificate"))}

// certificatePair refuses half of a client certificate in the provider's connection: the
// certificate without its key, or the key without its certificate, in the configuration and
// the environment variables that fill it (providerConnectionFrom refuses what the environment
// alone leaves half).
type certificatePair struct{}

func (certificatePair) Description(context.Context) string {
	return "client_certificate and client_key go together"
}
func (v certificatePair) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (certificatePair) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	name := req.Path.String()[strings.LastIndex(req.Path.String(), ".")+1:]
	other := map[string]string{"client_certificate": "client_key", "client_key": "client_certificate"}[name]
	var v types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, req.Path.ParentPath().AtName(other), &v)...)
	if !v.IsNull() || os.Getenv(connectionEnv[other]) != "" {
		return // set, or known only later: judged once known
	}
	resp.Diagnostics.Append(halfCertificate(req.Path, name))
}

// halfCertificate is the refusal of a client certificate without its key, or the other way
// round; at is where the half that is there was given.
func halfCertificate(at path.Path, given string) diag.Diagnostic {
	if given == "client_certificate" {
		return diagnostics.InvalidSetting("Connection", at, "a client certificate authenticates only with its private key: set client_key "+
			"(or "+connectionEnv["client_key"]+") too, or authenticate with token or exec instead")
	}
	return diagnostics.InvalidSetting("Connection", at, "a client key is the private key of a client certificate: set client_certificate "+
		"(or "+connectionEnv["client_certificate"]+") too, or leave client_key out")
}

var proxyURLPattern = regexp.MustCompile(`^(https?|socks5)://[^/]`)

var execAPIVersions = []string{"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"}

// nonEmptyConnection refuses `kubernetes = {}`, which says nothing.
type nonEmptyConnection struct{ where string }

func (nonEmptyConnection) Description(context.Context) string { return "sets at least one attribute" }
func (v nonEmptyConnection) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v nonEmptyConnection) ValidateObject(_ context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for _, a := range req.ConfigValue.Attributes() {
		if !a.IsNull() {
			return
		}
	}
	resp.Diagnostics.Append(diagnostics.InvalidSetting("Connection", req.Path, "sets nothing: give config_path (or config_paths), "+
		"or host with "+v.where+"; or leave kubernetes out"))
}

// resourceCredential refuses a static credential in a resource's own connection.
type resourceCredential struct{}

func (resourceCredential) Description(context.Context) string {
	return "is not set in a resource's connection"
}
func (v resourceCredential) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (resourceCredential) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return // judged once known: at plan, or else at apply (ownCredentials)
	}
	if strings.HasSuffix(req.Path.String(), ".client_key") {
		var cert types.String
		resp.Diagnostics.Append(req.Config.GetAttribute(ctx, req.Path.ParentPath().AtName("client_certificate"), &cert)...)
		if !cert.IsNull() {
			return // one certificate, one refusal: the certificate's
		}
	}
	resp.Diagnostics.Append(staticCredential(req.Path))
}

// staticCredential is the refusal of a static credential in a resource's own connection.
func staticCredential(at path.Path) diag.Diagnostic {
	return diagnostics.InvalidSetting("Connection", at, "a resource's kubernetes is stored in state and "+
		"used again as stored at refresh and destroy, so a static credential here would be stale once rotated, and every "+
		"rotation would plan an update. Put host, token and certificates on the provider instead "+
		"(provider \"ctr\" { kubernetes = { ... } }, read afresh on every run), or use exec or config_path here, "+
		"which yield current credentials whenever they are used")
}

// ownCredentials refuses, at apply, a static credential in a resource's own connection that
// was known only then (the attribute's validator refuses one known at plan).
func ownCredentials(own types.Object) diag.Diagnostics {
	var diags diag.Diagnostics
	if own.IsNull() || own.IsUnknown() {
		return diags
	}
	attrs := own.Attributes()
	for _, name := range staticCredentials {
		if name == "client_key" && attrs["client_certificate"] != nil && !attrs["client_certificate"].IsNull() {
			continue // one certificate, one refusal: the certificate's
		}
		if v, ok := attrs[name]; ok && !v.IsNull() && !v.IsUnknown() {
			diags.Append(staticCredential(path.Root("kubernetes").AtName(name)))
		}
	}
	return diags
}

const connectionDescription = "How to reach the Kubernetes cluster, with the kubernetes provider's attributes: kubeconfig files " +
	"(`config_path` or `config_paths`, optionally a context), explicit values that override them (`host`, credentials, TLS " +
	"settings, `proxy_url`), or an `exec` credential plugin. Nothing is implicit: `KUBECONFIG` and `~/.kube/config` are " +
	"never read unless named. "

// connectionSchema builds the object's attributes for the provider (p) or a resource (r).
func connectionAttributes[A any](str func(name string, sensitive bool, v []validator.String) A, boolean func(name string) A,
	list func(name string) A, exec func() A) map[string]A {
	attrs := map[string]A{}
	for name, typ := range connectionAttrTypes {
		switch {
		case name == "exec":
			attrs[name] = exec()
		case typ == types.BoolType:
			attrs[name] = boolean(name)
		case name == "config_paths":
			attrs[name] = list(name)
		default:
			attrs[name] = str(name, connectionSensitive[name], connectionValidators(name))
		}
	}
	return attrs
}

func envNote(name string) string {
	if env, ok := connectionEnv[name]; ok {
		if name == "insecure" {
			return " Defaults to the `" + env + "` environment variable, else `false`."
		}
		return " Defaults to the `" + env + "` environment variable."
	}
	return ""
}

func connectionProviderAttribute() pschema.SingleNestedAttribute {
	attrs := connectionAttributes(
		func(name string, sensitive bool, v []validator.String) pschema.Attribute {
			return pschema.StringAttribute{Optional: true, Sensitive: sensitive, Validators: v,
				MarkdownDescription: connectionDescriptions[name] + envNote(name)}
		},
		func(name string) pschema.Attribute {
			return pschema.BoolAttribute{Optional: true, MarkdownDescription: connectionDescriptions[name] + envNote(name)}
		},
		func(name string) pschema.Attribute {
			return pschema.ListAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.List{listvalidator.SizeAtLeast(1)},
				MarkdownDescription: connectionDescriptions[name] + " Defaults to the `KUBE_CONFIG_PATHS` environment variable (a list separated like `PATH`)."}
		},
		func() pschema.Attribute {
			return pschema.SingleNestedAttribute{Optional: true, MarkdownDescription: connectionDescriptions["exec"], Validators: execValidators,
				Attributes: map[string]pschema.Attribute{
					"api_version": pschema.StringAttribute{Required: true, MarkdownDescription: execDescriptions["api_version"],
						Validators: []validator.String{stringvalidator.OneOf(execAPIVersions...)}},
					"command": pschema.StringAttribute{Required: true, MarkdownDescription: execDescriptions["command"],
						Validators: []validator.String{stringvalidator.LengthAtLeast(1)}},
					"args": pschema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: execDescriptions["args"]},
					"env":  pschema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: execDescriptions["env"]},
				}}
		})
	return pschema.SingleNestedAttribute{
		Optional: true, Validators: []validator.Object{nonEmptyConnection{where: "token, a client certificate or exec"}},
		MarkdownDescription: connectionDescription + "The connection of every resource that sets no `kubernetes` of its own. " +
			"Never stored in state: it is evaluated afresh on every plan, apply, refresh and destroy, so rotated credentials " +
			"plan no change and destroy uses today's. It may use values of a cluster created in the same apply. Each attribute " +
			"left unset is read from its `KUBE_*` environment variable, as the kubernetes provider does.",
		Attributes: attrs,
	}
}

func connectionResourceAttribute() rschema.SingleNestedAttribute {
	attrs := connectionAttributes(
		func(name string, sensitive bool, v []validator.String) rschema.Attribute {
			desc := connectionDescriptions[name]
			for _, c := range staticCredentials {
				if c == name {
					v = []validator.String{resourceCredential{}} // refused, whatever it goes with
					desc += " Only in ctr_cluster's computed connection: a resource's own connection refuses static credentials (set them on the provider)."
				}
			}
			return rschema.StringAttribute{Optional: true, Sensitive: sensitive, Validators: v, MarkdownDescription: desc}
		},
		func(name string) rschema.Attribute {
			return rschema.BoolAttribute{Optional: true, MarkdownDescription: connectionDescriptions[name] + " Defaults to `false`."}
		},
		func(name string) rschema.Attribute {
			return rschema.ListAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.List{listvalidator.SizeAtLeast(1)},
				MarkdownDescription: connectionDescriptions[name]}
		},
		func() rschema.Attribute {
			return rschema.SingleNestedAttribute{Optional: true, MarkdownDescription: connectionDescriptions["exec"],
				Attributes: map[string]rschema.Attribute{
					"api_version": rschema.StringAttribute{Required: true, MarkdownDescription: execDescriptions["api_version"],
						Validators: []validator.String{stringvalidator.OneOf(execAPIVersions...)}},
					"command": rschema.StringAttribute{Required: true, MarkdownDescription: execDescriptions["command"],
						Validators: []validator.String{stringvalidator.LengthAtLeast(1)}},
					"args": rschema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: execDescriptions["args"]},
					"env":  rschema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: execDescriptions["env"]},
				}}
		})
	return rschema.SingleNestedAttribute{
		Optional: true, Validators: []validator.Object{nonEmptyConnection{where: "exec"}},
		MarkdownDescription: connectionDescription + "Overrides the provider's `kubernetes` for this resource; prefer the " +
			"provider's (or a provider alias per cluster). Unlike the provider's, this one is stored in state and used as " +
			"stored at refresh and destroy, so it takes only credential sources that yield current credentials when used — " +
			"a kubeconfig (`config_path`, `config_paths`, contexts) or `exec` — with `host`, `cluster_ca_certificate` and the " +
			"TLS settings; `token`, `client_certificate` and `client_key` are refused here. Changing it plans an in-place " +
			"update that changes no Kubernetes object.",
		Attributes: attrs,
	}
}

// providerConnection is the provider's connection as Configure resolved it.
type providerConnection struct {
	conn kube.Connection
	// unknown: the configuration depends on values known only after apply (a cluster created
	// in the same apply). Terraform configures the provider again, with them, before it
	// applies the resources that need them.
	unknown bool
}

// providerConnectionFrom resolves the provider's `kubernetes` and the KUBE_* environment.
func providerConnectionFrom(ctx context.Context, obj types.Object) (providerConnection, diag.Diagnostics) {
	if !fullyKnown(obj) {
		return providerConnection{unknown: true}, nil
	}
	var m connectionModel
	var diags diag.Diagnostics
	if !obj.IsNull() {
		diags.Append(obj.As(ctx, &m, basetypes.ObjectAsOptions{})...)
		if diags.HasError() {
			return providerConnection{}, diags
		}
	}
	conn, d := m.connection(ctx)
	diags.Append(d...)
	env := func(name string) string { return os.Getenv(connectionEnv[name]) }
	fill := func(dst *string, name string) {
		if *dst == "" {
			*dst = env(name)
		}
	}
	if len(conn.ConfigPaths) == 0 {
		if p := env("config_path"); p != "" {
			conn.ConfigPaths = []string{p}
		} else if ps := env("config_paths"); ps != "" {
			conn.ConfigPaths = filepath.SplitList(ps)
		}
	}
	fill(&conn.ConfigContext, "config_context")
	fill(&conn.ConfigContextAuthInfo, "config_context_auth_info")
	fill(&conn.ConfigContextCluster, "config_context_cluster")
	fill(&conn.Host, "host")
	fill(&conn.Token, "token")
	fill(&conn.ClientCertificate, "client_certificate")
	fill(&conn.ClientKey, "client_key")
	fill(&conn.ClusterCACertificate, "cluster_ca_certificate")
	switch {
	case conn.ClientCertificate != "" && conn.ClientKey == "":
		diags.Append(halfCertificate(path.Root("kubernetes").AtName("client_certificate"), "client_certificate"))
	case conn.ClientKey != "" && conn.ClientCertificate == "":
		diags.Append(halfCertificate(path.Root("kubernetes").AtName("client_key"), "client_key"))
	}
	fill(&conn.TLSServerName, "tls_server_name")
	fill(&conn.ProxyURL, "proxy_url")
	if m.Insecure.IsNull() {
		if v := env("insecure"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				diags.Append(diagnostics.Failed("Invalid Provider Environment", connectionEnv["insecure"]+" is "+strconv.Quote(v)+", not true or false", "", nil))
			}
			conn.Insecure = b
		}
	}
	return providerConnection{conn: conn}, diags
}

// connection converts the model (known values) to kube's.
func (m *connectionModel) connection(ctx context.Context) (kube.Connection, diag.Diagnostics) {
	var diags diag.Diagnostics
	c := kube.Connection{
		ConfigContext:         m.ConfigContext.ValueString(),
		ConfigContextAuthInfo: m.ConfigContextAuthInfo.ValueString(),
		ConfigContextCluster:  m.ConfigContextCluster.ValueString(),
		Host:                  m.Host.ValueString(),
		Token:                 m.Token.ValueString(),
		ClientCertificate:     m.ClientCertificate.ValueString(),
		ClientKey:             m.ClientKey.ValueString(),
		ClusterCACertificate:  m.ClusterCACertificate.ValueString(),
		Insecure:              m.Insecure.ValueBool(),
		TLSServerName:         m.TLSServerName.ValueString(),
		ProxyURL:              m.ProxyURL.ValueString(),
	}
	if p := m.ConfigPath.ValueString(); p != "" {
		c.ConfigPaths = []string{p}
	} else if !m.ConfigPaths.IsNull() {
		diags.Append(m.ConfigPaths.ElementsAs(ctx, &c.ConfigPaths, false)...)
	}
	if e := m.Exec; e != nil {
		c.Exec = &kube.ExecPlugin{APIVersion: e.APIVersion.ValueString(), Command: e.Command.ValueString()}
		if !e.Args.IsNull() {
			diags.Append(e.Args.ElementsAs(ctx, &c.Exec.Args, false)...)
		}
		if !e.Env.IsNull() {
			diags.Append(e.Env.ElementsAs(ctx, &c.Exec.Env, false)...)
		}
	}
	return c, diags
}

// connectionState says where a resource's connection comes from.
type connectionState int

const (
	connectionSet     connectionState = iota // known: connect with it
	connectionUnknown                        // known only after apply
	connectionNone                           // nothing anywhere
)

// connection picks the resource's own connection, else the provider's.
func connection(ctx context.Context, own types.Object, data *providerData) (kube.Connection, connectionState, diag.Diagnostics) {
	if !fullyKnown(own) {
		return kube.Connection{}, connectionUnknown, nil
	}
	if !own.IsNull() {
		var m connectionModel
		diags := own.As(ctx, &m, basetypes.ObjectAsOptions{})
		if diags.HasError() {
			return kube.Connection{}, connectionNone, diags
		}
		c, d := m.connection(ctx)
		diags.Append(d...)
		return c, connectionSet, diags
	}
	if data == nil || data.conn.conn.IsZero() && !data.conn.unknown {
		return kube.Connection{}, connectionNone, nil
	}
	if data.conn.unknown {
		return kube.Connection{}, connectionUnknown, nil
	}
	return data.conn.conn, connectionSet, nil
}

// noConnection is the error of a resource with no connection anywhere.
func noConnection(at path.Path) diag.Diagnostic {
	return diagnostics.FailedAt(at, "No Kubernetes Connection",
		"Neither this resource nor the provider says which cluster to use, and ctr never falls back to KUBECONFIG or "+
			"~/.kube/config (whichever cluster is current there is not necessarily this configuration's)",
		`Set the provider's connection: provider "ctr" { kubernetes = { config_path = "~/.kube/config" } } `+
			"(or config_paths, host with token or client_certificate and client_key, or exec), or the environment variable "+
			"KUBE_CONFIG_PATH (or KUBE_HOST with KUBE_TOKEN); or this resource's own kubernetes.", nil)
}

// requireConnection refuses at plan time a resource that could never connect.
func requireConnection(ctx context.Context, own types.Object, data *providerData, diags *diag.Diagnostics) {
	if data == nil {
		return // not configured: validation only
	}
	if _, st, _ := connection(ctx, own, data); st == connectionNone {
		diags.Append(noConnection(path.Root("kubernetes")))
	}
}

// kubeClient connects for one operation and sends the client's action lines to the
// Terraform log (TF_LOG=INFO shows them).
func kubeClient(ctx context.Context, own types.Object, data *providerData) (*kube.Client, diag.Diagnostics) {
	conn, st, diags := connection(ctx, own, data)
	if diags.HasError() {
		return nil, diags
	}
	switch st {
	case connectionNone:
		diags.Append(noConnection(path.Root("kubernetes")))
		return nil, diags
	case connectionUnknown:
		diags.Append(diagnostics.Failed("Kubernetes Connection Error", "The connection to the cluster is not known yet",
			"It depends on a value known only after apply; Terraform provides it before the resources that need it are applied.", nil))
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

// connectionPending reports whether a refresh must wait: the connection is known only after
// apply (the cluster is being created or replaced in this run), so the prior state stands.
func connectionPending(ctx context.Context, own types.Object, data *providerData) bool {
	_, st, _ := connection(ctx, own, data)
	return st == connectionUnknown
}
