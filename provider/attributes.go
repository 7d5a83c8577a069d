package provider

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/cube/layout"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/internal/volcano"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// The attributes every workload resource has, declared once. Each single value is checked
// here, by the schema, against the bounds and lists that internal/stack declares; what needs
// parsing or several values is stack's Validate's (see internal/stack/validate.go).

func idAttribute() schema.StringAttribute {
	return schema.StringAttribute{Computed: true, MarkdownDescription: "`namespace/name`.",
		PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}}
}

// nameAttribute is the resource's name; desc says what it names.
func nameAttribute(desc string) schema.StringAttribute {
	return schema.StringAttribute{Required: true, PlanModifiers: replaceStr(),
		MarkdownDescription: fmt.Sprintf("%s At most %d lowercase letters, digits and `-`, starting with a letter (it names Services) "+
			"and ending with a letter or digit.", desc, stack.MaxNameLength),
		Validators: []validator.String{stringvalidator.RegexMatches(stack.NamePattern, stack.NameRule)}}
}

func namespaceAttribute(desc string) schema.StringAttribute {
	return schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultNamespace), PlanModifiers: replaceStr(),
		MarkdownDescription: desc + " Defaults to `" + stack.DefaultNamespace + "`.",
		Validators:          []validator.String{stringvalidator.RegexMatches(stack.NamespacePattern, stack.NamespaceRule)}}
}

func stackAttribute(desc string) schema.StringAttribute {
	return schema.StringAttribute{Optional: true, MarkdownDescription: desc + " (the `app.kubernetes.io/part-of` label). Defaults to `name`."}
}

// adoptAttribute is the opt-in to take over existing objects that carry no owner label.
func adoptAttribute() schema.BoolAttribute {
	return schema.BoolAttribute{Optional: true, MarkdownDescription: "Take over an existing object of a name this resource renders when it carries no owner label " +
		"(`" + stack.OwnerLabel + "`): made by hand, or by a script before ctr. Unset or `false`: the apply refuses such an object, naming it, and leaves it as it is. " +
		"An object of another owner (another resource, another workspace) is never taken over. An adopted object is merged, not replaced (server-side apply): fields set by its earlier manager and not rendered here stay, " +
		"so a Service with other ports keeps them. It is this resource's from then on: destroy deletes it."}
}

func manifestsAttribute() schema.MapAttribute {
	return schema.MapAttribute{Computed: true, ElementType: types.StringType,
		MarkdownDescription: "Every Kubernetes object this resource owns, `apiVersion/Kind/name` -> YAML, rendered at plan time. " +
			"`terraform plan` shows field-level changes here, including drift made outside Terraform. Secret values show as `(sensitive value)`."}
}

// portAttribute is a TCP port with a default.
func portAttribute(desc string, def int64, modifiers ...planmodifier.Int64) schema.Int64Attribute {
	return schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(def), PlanModifiers: modifiers,
		MarkdownDescription: fmt.Sprintf("%s Defaults to `%d`.", desc, def),
		Validators:          []validator.Int64{int64validator.Between(stack.MinPort, stack.MaxPort)}}
}

func nodeSelectorAttribute(pods string) schema.MapAttribute {
	return schema.MapAttribute{Optional: true, ElementType: types.StringType,
		MarkdownDescription: "Node selector of " + pods + ": node label keys and the values they must have, e.g. `{ \"node.kubernetes.io/instance-type\" = \"bcc.g5.c8m32\" }`."}
}

func tolerationsAttribute(pods string) schema.ListNestedAttribute {
	return schema.ListNestedAttribute{Optional: true, MarkdownDescription: "Tolerations of " + pods + ", as Kubernetes spells them.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"key": schema.StringAttribute{Optional: true, MarkdownDescription: "Taint key the toleration matches; empty (with `operator = \"Exists\"`) matches every taint."},
			"operator": schema.StringAttribute{Optional: true, MarkdownDescription: "One of " + quoted(stack.TolerationOperators) + ". Defaults to `Equal`.",
				Validators: []validator.String{stringvalidator.OneOf(stack.TolerationOperators...)}},
			"value": schema.StringAttribute{Optional: true, MarkdownDescription: "Taint value, with `operator = \"Equal\"`."},
			"effect": schema.StringAttribute{Optional: true, MarkdownDescription: "One of " + quoted(stack.TaintEffects) + "; every effect when unset.",
				Validators: []validator.String{stringvalidator.OneOf(stack.TaintEffects...)}},
		}}}
}

func serviceTypeAttribute() schema.StringAttribute {
	return schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultServiceType),
		MarkdownDescription: "One of " + quoted(stack.ServiceTypes) + ". Defaults to `" + stack.DefaultServiceType + "`.",
		Validators:          []validator.String{stringvalidator.OneOf(stack.ServiceTypes...)}}
}

// pullSecretsAttribute is `image_pull_secrets`: Secrets in the resource's namespace that
// pods pull their images with; modifiers say what a change does.
func pullSecretsAttribute(pods string, modifiers ...planmodifier.List) schema.ListAttribute {
	return schema.ListAttribute{Optional: true, ElementType: types.StringType, PlanModifiers: modifiers,
		MarkdownDescription: "Names of `kubernetes.io/dockerconfigjson` Secrets in the namespace that " + pods + " pull their images with " +
			"(a private registry, or the mirror of the provider's `image_registry`).",
		Validators: []validator.List{listvalidator.ValueStringsAre(stringvalidator.RegexMatches(stack.SecretNamePattern, stack.SecretNameRule))}}
}

// imageValidators refuse an empty image, which Kubernetes would refuse at apply.
var imageValidators = []validator.String{stringvalidator.LengthAtLeast(1)}

// defaultsTo is a default timeout as the docs write it: "Defaults to `20m`.".
func defaultsTo(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("Defaults to `%dm`.", int(d/time.Minute))
	}
	return "Defaults to `" + d.String() + "`."
}

// opTimeouts are a resource's default timeouts, the one definition that its operations
// bound themselves by and its schema documents (0: the operation takes no timeout), and what
// each waits for when the generic words do not say it.
type opTimeouts struct {
	Create, Update, Delete                time.Duration
	CreateWaits, UpdateWaits, DeleteWaits string // "How long ...", without the default
}

// attribute is the `timeouts` object, each duration described with its default and checked
// at plan time: the timeouts package's own check neither names the attribute nor refuses a
// negative duration.
func (o opTimeouts) attribute(ctx context.Context) schema.Attribute {
	describe := func(what, generic string, def time.Duration) string {
		if def == 0 {
			return ""
		}
		return cmp.Or(what, generic) + " " + defaultsTo(def)
	}
	a := timeouts.Attributes(ctx, timeouts.Opts{
		Create: o.Create > 0, Update: o.Update > 0, Delete: o.Delete > 0,
		CreateDescription: describe(o.CreateWaits, "How long create may take, its waits included.", o.Create),
		UpdateDescription: describe(o.UpdateWaits, "How long an update may take, its waits included.", o.Update),
		DeleteDescription: describe(o.DeleteWaits, "How long destroy may take, until every object it deletes is gone.", o.Delete),
	})
	nested := a.(schema.SingleNestedAttribute)
	nested.MarkdownDescription = "How long each operation may take: " + durationValidator.rule + "."
	for name, attr := range nested.Attributes {
		s := attr.(schema.StringAttribute)
		s.Validators = []validator.String{durationValidator}
		s.MarkdownDescription = s.Description // the package sets only the plain one
		nested.Attributes[name] = s
	}
	return nested
}

// withTimeout bounds ctx by one of a resource's timeouts: get is the timeouts value's
// Create, Read, Update or Delete, def the default when it is not set. A bad value is
// reported in diags (and the default applies).
func withTimeout(ctx context.Context, get func(context.Context, time.Duration) (time.Duration, diag.Diagnostics), def time.Duration, diags *diag.Diagnostics) (context.Context, context.CancelFunc) {
	timeout, d := get(ctx, def)
	diags.Append(d...)
	return context.WithTimeout(ctx, timeout)
}

// stringCheck is a schema validator for one value that a function judges: the rule lives in
// one function (a kube or stack check, or a parse), the validator only reports it.
type stringCheck struct {
	kind  string // "Invalid <kind> Setting"
	rule  string // what is allowed, for the docs
	check func(string) error
}

func (v stringCheck) Description(context.Context) string             { return v.rule }
func (v stringCheck) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v stringCheck) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := v.check(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.Append(diagnostics.InvalidSetting(v.kind, req.Path, err.Error()))
	}
}

// durationValidator refuses what is not a positive Go duration.
var durationValidator = stringCheck{kind: "Timeout", rule: "a positive duration such as `30s`, `10m` or `1h30m`", check: func(s string) error {
	if d, err := time.ParseDuration(s); err != nil || d <= 0 {
		return fmt.Errorf("%q is not a positive duration; use a number with a unit (s, m or h), e.g. 30s, 10m or 1h30m", s)
	}
	return nil
}}

// serveVersionValidator accepts a cube version name, as served_version shows them.
var serveVersionValidator = stringCheck{kind: "Cube", rule: "a cube version name, as `served_version` and `kept_versions` show them", check: func(s string) error {
	if !layout.ValidVersion(s) {
		return fmt.Errorf("%q is not a cube version name: use digits, or two groups of digits joined by `_`, as served_version and kept_versions show them", s)
	}
	return nil
}}

// manifestURLValidator accepts what volcano.FetchManifest reads.
var manifestURLValidator = stringCheck{kind: "Volcano", rule: "an `https://`, `http://` or `file://` URL", check: volcano.CheckManifestURL}

func quoted(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = "`" + v + "`"
	}
	return strings.Join(q, ", ")
}

// resourcesRule says how the requests and limits given combine with a container's defaults
// (stack.Sizing.Over).
const resourcesRule = "A resource given (e.g. `memory`) replaces its default and the others keep theirs, except that a default request " +
	"above a given limit is lowered to that limit, and a default limit below a given request raised to that request. Every container " +
	"ctr renders has CPU and memory requests and limits, so that a namespace whose ResourceQuota requires them admits its pods and " +
	"no pod is BestEffort (the first evicted under node pressure)."

// resourcesDoc shows requests or limits as HCL, e.g. `{ cpu = "1", memory = "4Gi" }`.
func resourcesDoc(m map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		kv = append(kv, fmt.Sprintf("%s = %q", k, m[k]))
	}
	return "`{ " + strings.Join(kv, ", ") + " }`"
}

// defaultedResourcesAttribute is the `resources` (requests and limits) of what, over the
// defaults def (see stack.DefaultTransferResources), with its defaults and more in its text.
func defaultedResourcesAttribute(what string, def stack.Sizing, more string) schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: strings.TrimSpace("Requests and limits of " + what + ". " + resourcesRule + " " + more),
		Attributes: map[string]schema.Attribute{
			"requests": schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "Defaults to " + resourcesDoc(def.Requests) + "."},
			"limits":   schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "Defaults to " + resourcesDoc(def.Limits) + "."},
		}}
}
