package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// podModel is the `pod` block of every workload resource: one schema (podAttribute), one
// conversion each way (stack, podFromStack), for stack.PodSettings.
type podModel struct {
	NodeSelector              types.Map              `tfsdk:"node_selector"`
	Tolerations               []tolerationModel      `tfsdk:"tolerations"`
	Affinity                  *affinityModel         `tfsdk:"affinity"`
	ServiceAccountName        types.String           `tfsdk:"service_account_name"`
	ServiceAccountAnnotations types.Map              `tfsdk:"service_account_annotations"`
	Labels                    types.Map              `tfsdk:"labels"`
	Annotations               types.Map              `tfsdk:"annotations"`
	PriorityClassName         types.String           `tfsdk:"priority_class_name"`
	Env                       types.Map              `tfsdk:"env"`
	SecretEnv                 map[string]keyRefModel `tfsdk:"secret_env"`
	EnvFrom                   []envFromModel         `tfsdk:"env_from"`
	Volumes                   []volumeModel          `tfsdk:"volumes"`
	VolumeMounts              []volumeMountModel     `tfsdk:"volume_mounts"`
	SecurityContext           *securityContextModel  `tfsdk:"security_context"`
}

type affinityModel struct {
	Node *nodeAffinityModel `tfsdk:"node"`
}

type nodeAffinityModel struct {
	Required  []nodeTermModel      `tfsdk:"required"`
	Preferred []preferredTermModel `tfsdk:"preferred"`
}

type nodeTermModel struct {
	MatchExpressions []nodeRequirementModel `tfsdk:"match_expressions"`
}

type preferredTermModel struct {
	Weight           types.Int64            `tfsdk:"weight"`
	MatchExpressions []nodeRequirementModel `tfsdk:"match_expressions"`
}

type nodeRequirementModel struct {
	Key      types.String `tfsdk:"key"`
	Operator types.String `tfsdk:"operator"`
	Values   types.List   `tfsdk:"values"`
}

type keyRefModel struct {
	Secret types.String `tfsdk:"secret"`
	Key    types.String `tfsdk:"key"`
}

type envFromModel struct {
	Secret    types.String `tfsdk:"secret"`
	ConfigMap types.String `tfsdk:"config_map"`
	Prefix    types.String `tfsdk:"prefix"`
}

type volumeModel struct {
	Name                  types.String   `tfsdk:"name"`
	PersistentVolumeClaim *claimModel    `tfsdk:"persistent_volume_claim"`
	Secret                *nameModel     `tfsdk:"secret"`
	ConfigMap             *nameModel     `tfsdk:"config_map"`
	CSI                   *csiModel      `tfsdk:"csi"`
	EmptyDir              *emptyDirModel `tfsdk:"empty_dir"`
}

type claimModel struct {
	ClaimName types.String `tfsdk:"claim_name"`
	ReadOnly  types.Bool   `tfsdk:"read_only"`
}

type nameModel struct {
	Name types.String `tfsdk:"name"`
}

type csiModel struct {
	Driver            types.String `tfsdk:"driver"`
	ReadOnly          types.Bool   `tfsdk:"read_only"`
	VolumeAttributes  types.Map    `tfsdk:"volume_attributes"`
	NodePublishSecret types.String `tfsdk:"node_publish_secret"`
}

type emptyDirModel struct {
	Medium    types.String `tfsdk:"medium"`
	SizeLimit types.String `tfsdk:"size_limit"`
}

type volumeMountModel struct {
	Name      types.String `tfsdk:"name"`
	MountPath types.String `tfsdk:"mount_path"`
	SubPath   types.String `tfsdk:"sub_path"`
	ReadOnly  types.Bool   `tfsdk:"read_only"`
}

// podDocs is the one description of the pod shape, shown on each resource's page.
const podDocs = "Settings added to, or changed in, %s: scheduling (`node_selector`, `tolerations`, `affinity`, " +
	"`priority_class_name`), identity (`service_account_name`, `service_account_annotations`), metadata (`labels`, `annotations`), " +
	"environment (`env`, `secret_env`, `env_from`), extra `volumes` and `volume_mounts`, and `security_context`. Every workload " +
	"resource takes the same shape; see the guide [Pod settings](../guides/pod-settings.md). What ctr sets itself (its labels and annotations, its volumes " +
	"and mount paths) cannot be overridden: a setting that collides with it is refused at plan time."

// podAttribute is the schema of `pod`; pods names the pods it applies to, images what their
// images add to the hardened defaults, and note what a change does.
func podAttribute(pods, images, note string, modifiers ...planmodifier.Object) schema.SingleNestedAttribute {
	str := func(desc string, v ...validator.String) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, MarkdownDescription: desc, Validators: v}
	}
	strMap := func(desc string) schema.MapAttribute {
		return schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: desc}
	}
	readOnly := func(what string) schema.BoolAttribute {
		return schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
			MarkdownDescription: "Mount " + what + " read-only. Defaults to `false`."}
	}
	requirements := schema.ListNestedAttribute{Required: true, MarkdownDescription: "Node label requirements, all of which must hold.",
		Validators: []validator.List{listvalidator.SizeAtLeast(1)},
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"key": schema.StringAttribute{Required: true, MarkdownDescription: "Node label key, e.g. `topology.kubernetes.io/zone`."},
			"operator": schema.StringAttribute{Required: true, MarkdownDescription: "One of " + quoted(stack.NodeOperators) + ".",
				Validators: []validator.String{stringvalidator.OneOf(stack.NodeOperators...)}},
			"values": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Values: at least one with `In` and `NotIn`, none with `Exists` and `DoesNotExist`, one integer with `Gt` and `Lt`."},
		}}}
	name := func(kind string) schema.SingleNestedAttribute {
		return schema.SingleNestedAttribute{Optional: true, MarkdownDescription: "A " + kind + " in the namespace, mounted as files.",
			Attributes: map[string]schema.Attribute{"name": schema.StringAttribute{Required: true, MarkdownDescription: "Name of the " + kind + "."}}}
	}
	return schema.SingleNestedAttribute{Optional: true, PlanModifiers: modifiers,
		MarkdownDescription: fmt.Sprintf(podDocs, pods) + " " + note,
		Attributes: map[string]schema.Attribute{
			"node_selector": nodeSelectorAttribute("the pods"),
			"tolerations":   tolerationsAttribute("the pods"),
			"affinity": schema.SingleNestedAttribute{Optional: true, MarkdownDescription: "Scheduling affinity of the pods.",
				Attributes: map[string]schema.Attribute{
					"node": schema.SingleNestedAttribute{Optional: true, MarkdownDescription: "Node affinity, as Kubernetes' `nodeAffinity`.",
						Attributes: map[string]schema.Attribute{
							"required": schema.ListNestedAttribute{Optional: true,
								MarkdownDescription: "Terms of which a node must match at least one (`requiredDuringSchedulingIgnoredDuringExecution`).",
								NestedObject:        schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{"match_expressions": requirements}}},
							"preferred": schema.ListNestedAttribute{Optional: true,
								MarkdownDescription: "Weighted terms the scheduler prefers (`preferredDuringSchedulingIgnoredDuringExecution`).",
								NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
									"weight": schema.Int64Attribute{Required: true,
										MarkdownDescription: fmt.Sprintf("From %d to %d.", stack.MinAffinityWeight, stack.MaxAffinityWeight),
										Validators:          []validator.Int64{int64validator.Between(stack.MinAffinityWeight, stack.MaxAffinityWeight)}},
									"match_expressions": requirements,
								}}},
						}},
				}},
			"service_account_name": str("Run the pods as this existing ServiceAccount (its token is then mounted as the ServiceAccount says). " +
				"For the training tasks, the launcher's Role (pods get/list/watch) is bound to it instead of the job's own ServiceAccount."),
			"service_account_annotations": strMap("Annotations of the ServiceAccount ctr creates for the pods, e.g. " +
				"`{ \"eks.amazonaws.com/role-arn\" = \"arn:aws:iam::...:role/ctr\" }` (IRSA) or `{ \"iam.gke.io/gcp-service-account\" = \"ctr@PROJECT.iam.gserviceaccount.com\" }` " +
				"(Workload Identity). The training tasks' ServiceAccount is the job's own; for the other pods ctr creates one named after the resource " +
				"only when annotations are given, and the pods name the namespace's `" + stack.DefaultServiceAccount + "` ServiceAccount when there is none (so that removing " +
				"the annotations, which deletes that ServiceAccount, leaves no pod template naming it). Refused with `service_account_name`, whose ServiceAccount is not ctr's."),
			"labels": strMap("Extra labels of the pods. Keys ctr sets on the pods, and keys under " + quoted(stack.ReservedLabelPrefixes) + ", are refused."),
			"annotations": strMap("Extra annotations of the pods. Keys ctr sets on the pods, and keys under " + quoted(stack.ReservedAnnotationPrefixes) +
				", are refused."),
			"priority_class_name": str("PriorityClass of the pods."),
			"env": strMap("Extra environment variables of every container; they replace ctr's variables of the same name. Values are plain " +
				"configuration: they show in `manifests` like the rest of the pods. Pass credentials with `secret_env` or `env_from`."),
			"secret_env": schema.MapNestedAttribute{Optional: true,
				MarkdownDescription: "Environment variables read from Secrets in the namespace (`valueFrom.secretKeyRef`): only the Secret's name and key " +
					"reach `manifests` and the cluster's objects, never the value.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"secret": schema.StringAttribute{Required: true, MarkdownDescription: "Name of the Secret."},
					"key":    schema.StringAttribute{Required: true, MarkdownDescription: "Key in the Secret."},
				}}},
			"env_from": schema.ListNestedAttribute{Optional: true,
				MarkdownDescription: "Secrets and ConfigMaps in the namespace whose every key becomes a variable (`envFrom`).",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"secret":     str("Name of a Secret; exactly one of `secret` and `config_map`."),
					"config_map": str("Name of a ConfigMap; exactly one of `secret` and `config_map`."),
					"prefix":     str("Prefix of every variable's name."),
				}}},
			"volumes": schema.ListNestedAttribute{Optional: true,
				MarkdownDescription: "Extra volumes of the pods, each with exactly one source. Names of ctr's own volumes are refused.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{Required: true, MarkdownDescription: "Volume name, referred to by `volume_mounts`."},
					"persistent_volume_claim": schema.SingleNestedAttribute{Optional: true, MarkdownDescription: "A PersistentVolumeClaim in the namespace, e.g. a dataset.",
						Attributes: map[string]schema.Attribute{
							"claim_name": schema.StringAttribute{Required: true, MarkdownDescription: "Name of the claim."},
							"read_only":  readOnly("the claim"),
						}},
					"secret":     name("Secret"),
					"config_map": name("ConfigMap"),
					"csi": schema.SingleNestedAttribute{Optional: true, MarkdownDescription: "An inline CSI volume, e.g. an object storage bucket mounted by its CSI driver.",
						Attributes: map[string]schema.Attribute{
							"driver":              schema.StringAttribute{Required: true, MarkdownDescription: "CSI driver name, e.g. `s3.csi.aws.com`."},
							"read_only":           readOnly("the volume"),
							"volume_attributes":   strMap("The driver's volume attributes, e.g. `{ bucketName = \"ctr-data\" }`."),
							"node_publish_secret": str("A Secret in the namespace with the driver's credentials (`nodePublishSecretRef`)."),
						}},
					"empty_dir": schema.SingleNestedAttribute{Optional: true, MarkdownDescription: "Scratch space that lives as long as the pod.",
						Attributes: map[string]schema.Attribute{
							"medium":     str("`Memory` for a tmpfs; the node's disk when unset.", stringvalidator.OneOf(stack.EmptyDirMedia...)),
							"size_limit": str("Size limit, a Kubernetes quantity, e.g. `1Gi`."),
						}},
				}}},
			"volume_mounts": schema.ListNestedAttribute{Optional: true,
				MarkdownDescription: "Mounts of the extra `volumes` into every container. A path inside one of ctr's own mounts is refused.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":       schema.StringAttribute{Required: true, MarkdownDescription: "One of `volumes`."},
					"mount_path": schema.StringAttribute{Required: true, MarkdownDescription: "Absolute path in the containers."},
					"sub_path":   str("Path inside the volume to mount instead of its root."),
					"read_only":  readOnly("it"),
				}}},
			"security_context": securityContextAttribute("the pods", images),
		},
	}
}

// stack converts the block; nil stays nil.
func (m *podModel) stack(ctx context.Context, diags *diag.Diagnostics) *stack.PodSettings {
	if m == nil {
		return nil
	}
	p := &stack.PodSettings{NodeSelector: stringMap(ctx, m.NodeSelector, diags), Tolerations: tolerations(m.Tolerations),
		ServiceAccountName: m.ServiceAccountName.ValueString(), ServiceAccountAnnotations: stringMap(ctx, m.ServiceAccountAnnotations, diags),
		Labels: stringMap(ctx, m.Labels, diags), Annotations: stringMap(ctx, m.Annotations, diags), PriorityClassName: m.PriorityClassName.ValueString(),
		Env: stringMap(ctx, m.Env, diags), SecurityContext: m.SecurityContext.stack(ctx, diags)}
	reqs := func(rs []nodeRequirementModel) []stack.NodeRequirement {
		var out []stack.NodeRequirement
		for _, r := range rs {
			out = append(out, stack.NodeRequirement{Key: r.Key.ValueString(), Operator: r.Operator.ValueString(), Values: stringList(ctx, r.Values, diags)})
		}
		return out
	}
	if a := m.Affinity; a != nil {
		p.Affinity = &stack.Affinity{}
		if n := a.Node; n != nil {
			p.Affinity.Node = &stack.NodeAffinity{}
			for _, t := range n.Required {
				p.Affinity.Node.Required = append(p.Affinity.Node.Required, stack.NodeSelectorTerm{MatchExpressions: reqs(t.MatchExpressions)})
			}
			for _, t := range n.Preferred {
				p.Affinity.Node.Preferred = append(p.Affinity.Node.Preferred, stack.PreferredTerm{Weight: int32(t.Weight.ValueInt64()), MatchExpressions: reqs(t.MatchExpressions)})
			}
		}
	}
	if m.SecretEnv != nil {
		p.SecretEnv = map[string]stack.KeyRef{}
		for k, r := range m.SecretEnv {
			p.SecretEnv[k] = stack.KeyRef{Secret: r.Secret.ValueString(), Key: r.Key.ValueString()}
		}
	}
	for _, e := range m.EnvFrom {
		p.EnvFrom = append(p.EnvFrom, stack.EnvFrom{Secret: e.Secret.ValueString(), ConfigMap: e.ConfigMap.ValueString(), Prefix: e.Prefix.ValueString()})
	}
	for _, v := range m.Volumes {
		out := stack.Volume{Name: v.Name.ValueString()}
		if s := v.PersistentVolumeClaim; s != nil {
			out.PersistentVolumeClaim = &stack.ClaimSource{ClaimName: s.ClaimName.ValueString(), ReadOnly: s.ReadOnly.ValueBool()}
		}
		if s := v.Secret; s != nil {
			out.Secret = &stack.SecretSource{Name: s.Name.ValueString()}
		}
		if s := v.ConfigMap; s != nil {
			out.ConfigMap = &stack.SecretSource{Name: s.Name.ValueString()}
		}
		if s := v.CSI; s != nil {
			out.CSI = &stack.CSISource{Driver: s.Driver.ValueString(), ReadOnly: s.ReadOnly.ValueBool(),
				VolumeAttributes: stringMap(ctx, s.VolumeAttributes, diags), NodePublishSecret: s.NodePublishSecret.ValueString()}
		}
		if s := v.EmptyDir; s != nil {
			out.EmptyDir = &stack.EmptyDirSource{Medium: s.Medium.ValueString(), SizeLimit: s.SizeLimit.ValueString()}
		}
		p.Volumes = append(p.Volumes, out)
	}
	for _, mt := range m.VolumeMounts {
		p.VolumeMounts = append(p.VolumeMounts, stack.VolumeMount{Name: mt.Name.ValueString(), MountPath: mt.MountPath.ValueString(),
			SubPath: mt.SubPath.ValueString(), ReadOnly: mt.ReadOnly.ValueBool()})
	}
	return p
}

// podFromStack rebuilds the block from settings read back from the cluster (import).
func podFromStack(ctx context.Context, p *stack.PodSettings, diags *diag.Diagnostics) *podModel {
	if p == nil {
		return nil
	}
	m := &podModel{NodeSelector: optionalStringMap(ctx, p.NodeSelector, diags), Tolerations: tolerationsFromStack(p.Tolerations),
		ServiceAccountName: optionalString(p.ServiceAccountName), ServiceAccountAnnotations: optionalStringMap(ctx, p.ServiceAccountAnnotations, diags),
		Labels: optionalStringMap(ctx, p.Labels, diags), Annotations: optionalStringMap(ctx, p.Annotations, diags),
		PriorityClassName: optionalString(p.PriorityClassName), Env: optionalStringMap(ctx, p.Env, diags),
		SecurityContext: securityContextFromStack(ctx, p.SecurityContext, diags)}
	reqs := func(rs []stack.NodeRequirement) []nodeRequirementModel {
		var out []nodeRequirementModel
		for _, r := range rs {
			out = append(out, nodeRequirementModel{Key: types.StringValue(r.Key), Operator: types.StringValue(r.Operator), Values: optionalStringList(ctx, r.Values, diags)})
		}
		return out
	}
	if a := p.Affinity; a != nil {
		m.Affinity = &affinityModel{}
		if n := a.Node; n != nil {
			m.Affinity.Node = &nodeAffinityModel{}
			for _, t := range n.Required {
				m.Affinity.Node.Required = append(m.Affinity.Node.Required, nodeTermModel{MatchExpressions: reqs(t.MatchExpressions)})
			}
			for _, t := range n.Preferred {
				m.Affinity.Node.Preferred = append(m.Affinity.Node.Preferred, preferredTermModel{Weight: types.Int64Value(int64(t.Weight)), MatchExpressions: reqs(t.MatchExpressions)})
			}
		}
	}
	if p.SecretEnv != nil {
		m.SecretEnv = map[string]keyRefModel{}
		for k, r := range p.SecretEnv {
			m.SecretEnv[k] = keyRefModel{Secret: types.StringValue(r.Secret), Key: types.StringValue(r.Key)}
		}
	}
	for _, e := range p.EnvFrom {
		m.EnvFrom = append(m.EnvFrom, envFromModel{Secret: optionalString(e.Secret), ConfigMap: optionalString(e.ConfigMap), Prefix: optionalString(e.Prefix)})
	}
	for _, v := range p.Volumes {
		out := volumeModel{Name: types.StringValue(v.Name)}
		if s := v.PersistentVolumeClaim; s != nil {
			out.PersistentVolumeClaim = &claimModel{ClaimName: types.StringValue(s.ClaimName), ReadOnly: types.BoolValue(s.ReadOnly)}
		}
		if s := v.Secret; s != nil {
			out.Secret = &nameModel{Name: types.StringValue(s.Name)}
		}
		if s := v.ConfigMap; s != nil {
			out.ConfigMap = &nameModel{Name: types.StringValue(s.Name)}
		}
		if s := v.CSI; s != nil {
			out.CSI = &csiModel{Driver: types.StringValue(s.Driver), ReadOnly: types.BoolValue(s.ReadOnly),
				VolumeAttributes: optionalStringMap(ctx, s.VolumeAttributes, diags), NodePublishSecret: optionalString(s.NodePublishSecret)}
		}
		if s := v.EmptyDir; s != nil {
			out.EmptyDir = &emptyDirModel{Medium: optionalString(s.Medium), SizeLimit: optionalString(s.SizeLimit)}
		}
		m.Volumes = append(m.Volumes, out)
	}
	for _, mt := range p.VolumeMounts {
		m.VolumeMounts = append(m.VolumeMounts, volumeMountModel{Name: types.StringValue(mt.Name), MountPath: types.StringValue(mt.MountPath),
			SubPath: optionalString(mt.SubPath), ReadOnly: types.BoolValue(mt.ReadOnly)})
	}
	return m
}

// deprecatedFor is the plan-time warning of a resource-level attribute that the pod block replaces.
func deprecatedFor(replacement string) string {
	return "Use " + replacement + " instead: every pod setting now lives in the pod block, the same on every resource. " +
		"This attribute keeps working; it may not be set together with " + replacement + "."
}

// deprecated marks a security_context (or other nested attribute) as an alias of its pod counterpart.
func deprecated(a schema.SingleNestedAttribute, replacement string) schema.SingleNestedAttribute {
	a.DeprecationMessage = deprecatedFor(replacement)
	a.MarkdownDescription = "Deprecated: use `" + replacement + "`. " + a.MarkdownDescription
	return a
}
