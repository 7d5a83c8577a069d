package provider

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// The data sources ctr_training_job, ctr_cube and ctr_serving: what a workload resource
// exports, read from the live objects of NAMESPACE/NAME in another workspace. Each is its
// resource, used as import uses it (id, namespace and name alone, the rest read from the
// cluster), so a data source reads exactly what the resource would; its attributes are the
// resource's computed ones, derived from the resource's schema.

// NewTrainingJobDataSource is the ctr_training_job data source.
func NewTrainingJobDataSource() datasource.DataSource {
	return &workloadDataSource{resource: NewTrainingJobResource()}
}

// NewCubeDataSource is the ctr_cube data source.
func NewCubeDataSource() datasource.DataSource {
	return &workloadDataSource{resource: NewCubeResource()}
}

// NewServingDataSource is the ctr_serving data source.
func NewServingDataSource() datasource.DataSource {
	return &workloadDataSource{resource: NewServingResource()}
}

// The data sources' own arguments, which name the object; every other attribute is exported.
var dataSourceArguments = []string{"name", "namespace", "kubernetes"}

// notExported are the resource's computed attributes that a data source leaves out: the
// manifests are the resource's own record of what it applied.
var notExported = map[string]bool{"manifests": true}

type workloadDataSource struct{ resource resource.Resource }

var _ datasource.DataSourceWithConfigure = (*workloadDataSource)(nil)

func (d *workloadDataSource) Metadata(ctx context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = d.typeName(ctx, req.ProviderTypeName)
}

// typeName is the resource's type name, which the data source shares.
func (d *workloadDataSource) typeName(ctx context.Context, provider string) string {
	var r resource.MetadataResponse
	d.resource.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: provider}, &r)
	return r.TypeName
}

func (d *workloadDataSource) Configure(ctx context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	var r resource.ConfigureResponse
	d.resource.(resource.ResourceWithConfigure).Configure(ctx, resource.ConfigureRequest{ProviderData: req.ProviderData}, &r)
	resp.Diagnostics.Append(r.Diagnostics...)
}

func (d *workloadDataSource) resourceSchema(ctx context.Context) rschema.Schema {
	var r resource.SchemaResponse
	d.resource.Schema(ctx, resource.SchemaRequest{}, &r)
	return r.Schema
}

// exported are the names of the resource's attributes that the data source exports.
func exported(s rschema.Schema) []string {
	var out []string
	for name, a := range s.Attributes {
		if a.IsComputed() && !a.IsOptional() && !a.IsRequired() && !notExported[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func (d *workloadDataSource) Schema(ctx context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	rs := d.resourceSchema(ctx)
	attrs := map[string]dschema.Attribute{}
	for _, name := range dataSourceArguments {
		attrs[name] = dataAttribute(rs.Attributes[name], false)
	}
	// A data source names its object in full: no default namespace.
	for name, desc := range map[string]string{"name": "The resource's `name`.", "namespace": "The resource's `namespace`."} {
		a := attrs[name].(dschema.StringAttribute)
		a.Required, a.Optional, a.Computed, a.MarkdownDescription = true, false, false, desc
		attrs[name] = a
	}
	conn := attrs["kubernetes"].(dschema.SingleNestedAttribute)
	conn.MarkdownDescription = "How to reach the cluster, with the attributes of the resource's `kubernetes`; the provider's `kubernetes` when unset."
	attrs["kubernetes"] = conn
	for _, name := range exported(rs) {
		attrs[name] = dataAttribute(rs.Attributes[name], true)
	}
	resp.Schema = dschema.Schema{
		MarkdownDescription: "What the resource of this name exports, read from its live objects by namespace and name: for a workspace " +
			"that did not create it (no `terraform_remote_state` needed). It reads what the resource reads at import, and fails when none of its objects exists.",
		Attributes: attrs,
	}
}

func (d *workloadDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	rs := d.resourceSchema(ctx)
	// The resource's state as import leaves it: id, namespace and name (and the connection).
	state := tfsdk.State{Schema: rs, Raw: tftypes.NewValue(rs.Type().TerraformType(ctx), nil)}
	var ns, name string
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("namespace"), &ns)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("name"), &name)...)
	var conn attr.Value
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("kubernetes"), &conn)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(state.SetAttribute(ctx, path.Root("id"), namespaceName(ns, name))...)
	resp.Diagnostics.Append(state.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(state.SetAttribute(ctx, path.Root("name"), name)...)
	resp.Diagnostics.Append(state.SetAttribute(ctx, path.Root("kubernetes"), conn)...)
	if resp.Diagnostics.HasError() {
		return
	}
	read := resource.ReadResponse{State: state}
	d.resource.Read(ctx, resource.ReadRequest{State: state}, &read)
	resp.Diagnostics.Append(read.Diagnostics...)
	if resp.Diagnostics.HasError() {
		return
	}
	if read.State.Raw.IsNull() {
		typ := d.typeName(ctx, providerTypeName)
		resp.Diagnostics.Append(diagnostics.Failed("Read "+typ+" Error", fmt.Sprintf("%s %s/%s: none of its objects exist", typ, ns, name),
			"Check the namespace and name, and that the connection reaches the cluster the resource was applied to.", nil))
		return
	}
	for _, a := range slices.Concat(dataSourceArguments, exported(rs)) {
		var v attr.Value
		resp.Diagnostics.Append(read.State.GetAttribute(ctx, path.Root(a), &v)...)
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root(a), v)...)
	}
}

// dataAttribute is a resource schema attribute as a data source's: the same type,
// description and sensitivity; computed (exported) or as the resource takes it (an argument).
func dataAttribute(a rschema.Attribute, computed bool) dschema.Attribute {
	req, opt, comp := a.IsRequired(), a.IsOptional(), a.IsComputed()
	if computed {
		req, opt, comp = false, false, true
	}
	desc, sens := a.GetMarkdownDescription(), a.IsSensitive()
	nested := func(attrs map[string]rschema.Attribute) map[string]dschema.Attribute {
		out := map[string]dschema.Attribute{}
		for n, na := range attrs {
			out[n] = dataAttribute(na, computed)
		}
		return out
	}
	switch a := a.(type) {
	case rschema.StringAttribute:
		s := dschema.StringAttribute{Required: req, Optional: opt, Computed: comp, Sensitive: sens, MarkdownDescription: desc}
		if !computed {
			s.Validators = a.Validators
		}
		return s
	case rschema.BoolAttribute:
		return dschema.BoolAttribute{Required: req, Optional: opt, Computed: comp, Sensitive: sens, MarkdownDescription: desc}
	case rschema.Int64Attribute:
		return dschema.Int64Attribute{Required: req, Optional: opt, Computed: comp, Sensitive: sens, MarkdownDescription: desc}
	case rschema.ListAttribute:
		s := dschema.ListAttribute{Required: req, Optional: opt, Computed: comp, Sensitive: sens, MarkdownDescription: desc, ElementType: a.ElementType}
		if !computed {
			s.Validators = a.Validators
		}
		return s
	case rschema.MapAttribute:
		return dschema.MapAttribute{Required: req, Optional: opt, Computed: comp, Sensitive: sens, MarkdownDescription: desc, ElementType: a.ElementType}
	case rschema.SingleNestedAttribute:
		s := dschema.SingleNestedAttribute{Required: req, Optional: opt, Computed: comp, Sensitive: sens, MarkdownDescription: desc, Attributes: nested(a.Attributes)}
		if !computed {
			s.Validators = a.Validators
		}
		return s
	case rschema.MapNestedAttribute:
		return dschema.MapNestedAttribute{Required: req, Optional: opt, Computed: comp, Sensitive: sens, MarkdownDescription: desc,
			NestedObject: dschema.NestedAttributeObject{Attributes: nested(a.NestedObject.Attributes)}}
	case rschema.ListNestedAttribute:
		return dschema.ListNestedAttribute{Required: req, Optional: opt, Computed: comp, Sensitive: sens, MarkdownDescription: desc,
			NestedObject: dschema.NestedAttributeObject{Attributes: nested(a.NestedObject.Attributes)}}
	}
	panic(fmt.Sprintf("dataAttribute: no data source form of %T", a)) // TestDataSources_ExportWhatTheResourcesCompute covers every one used
}
