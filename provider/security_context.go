package provider

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// securityContextModel is the `security_context` of every workload resource: one shape,
// one schema (securityContextAttribute), one conversion to stack.SecurityContext.
type securityContextModel struct {
	RunAsUser                types.Int64  `tfsdk:"run_as_user"`
	RunAsGroup               types.Int64  `tfsdk:"run_as_group"`
	FSGroup                  types.Int64  `tfsdk:"fs_group"`
	RunAsNonRoot             types.Bool   `tfsdk:"run_as_non_root"`
	ReadOnlyRootFilesystem   types.Bool   `tfsdk:"read_only_root_filesystem"`
	AllowPrivilegeEscalation types.Bool   `tfsdk:"allow_privilege_escalation"`
	SeccompProfile           types.String `tfsdk:"seccomp_profile"`
	AddCapabilities          types.List   `tfsdk:"add_capabilities"`
}

// hardenedDefaults describes, for the docs, what every pod gets unless security_context says
// otherwise.
const hardenedDefaults = "Every pod runs with the `RuntimeDefault` seccomp profile, and every container with " +
	"`allowPrivilegeEscalation: false` and every capability dropped."

// securityContextAttribute is the schema of `security_context`; images says which defaults
// the pods' images add (a non-root user, a read-only root filesystem, an fsGroup).
func securityContextAttribute(pods, images string) schema.SingleNestedAttribute {
	id := func(what string) schema.Int64Attribute {
		return schema.Int64Attribute{Optional: true, MarkdownDescription: what,
			Validators: []validator.Int64{int64validator.Between(0, stack.MaxID)}}
	}
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: "Relaxes (or tightens) the hardened security settings of " + pods + ". " + hardenedDefaults + " " + images +
			" Each attribute set here replaces its default; those left unset keep it.",
		Attributes: map[string]schema.Attribute{
			"run_as_user":  id("`runAsUser` of the pods."),
			"run_as_group": id("`runAsGroup` of the pods."),
			"fs_group":     id("`fsGroup` of the pods: the group their volumes are given, so that the pods can write them."),
			"run_as_non_root": schema.BoolAttribute{Optional: true,
				MarkdownDescription: "`runAsNonRoot`: the kubelet refuses to start a container whose user is root."},
			"read_only_root_filesystem": schema.BoolAttribute{Optional: true,
				MarkdownDescription: "`readOnlyRootFilesystem` of every container."},
			"allow_privilege_escalation": schema.BoolAttribute{Optional: true,
				MarkdownDescription: "`allowPrivilegeEscalation` of every container (setuid binaries, `sudo`)."},
			"seccomp_profile": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Seccomp profile of the pods: one of " + quoted(stack.SeccompProfiles) + ".",
				Validators:          []validator.String{stringvalidator.OneOf(stack.SeccompProfiles...)}},
			"add_capabilities": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Capabilities added back to every container after all are dropped, as Kubernetes spells them, e.g. `[\"CHOWN\", \"NET_BIND_SERVICE\"]`.",
				Validators:          []validator.List{listvalidator.SizeAtLeast(1)}},
		},
	}
}

// stack converts the model; nil stays nil (every default kept).
func (m *securityContextModel) stack(ctx context.Context, diags *diag.Diagnostics) *stack.SecurityContext {
	if m == nil {
		return nil
	}
	i64 := func(v types.Int64) *int64 {
		if v.IsNull() || v.IsUnknown() {
			return nil
		}
		n := v.ValueInt64()
		return &n
	}
	b := func(v types.Bool) *bool {
		if v.IsNull() || v.IsUnknown() {
			return nil
		}
		x := v.ValueBool()
		return &x
	}
	s := &stack.SecurityContext{RunAsUser: i64(m.RunAsUser), RunAsGroup: i64(m.RunAsGroup), FSGroup: i64(m.FSGroup),
		RunAsNonRoot: b(m.RunAsNonRoot), ReadOnlyRootFilesystem: b(m.ReadOnlyRootFilesystem), AllowPrivilegeEscalation: b(m.AllowPrivilegeEscalation),
		SeccompProfile: m.SeccompProfile.ValueString()}
	if !m.AddCapabilities.IsNull() && !m.AddCapabilities.IsUnknown() {
		diags.Append(m.AddCapabilities.ElementsAs(ctx, &s.AddCapabilities, false)...)
	}
	return s
}

// securityContextFromStack rebuilds the configuration from settings read back (import).
func securityContextFromStack(ctx context.Context, s *stack.SecurityContext, diags *diag.Diagnostics) *securityContextModel {
	if s == nil {
		return nil
	}
	i64 := func(v *int64) types.Int64 {
		if v == nil {
			return types.Int64Null()
		}
		return types.Int64Value(*v)
	}
	b := func(v *bool) types.Bool {
		if v == nil {
			return types.BoolNull()
		}
		return types.BoolValue(*v)
	}
	m := &securityContextModel{RunAsUser: i64(s.RunAsUser), RunAsGroup: i64(s.RunAsGroup), FSGroup: i64(s.FSGroup),
		RunAsNonRoot: b(s.RunAsNonRoot), ReadOnlyRootFilesystem: b(s.ReadOnlyRootFilesystem), AllowPrivilegeEscalation: b(s.AllowPrivilegeEscalation),
		SeccompProfile: optionalString(s.SeccompProfile), AddCapabilities: types.ListNull(types.StringType)}
	if s.AddCapabilities != nil {
		v, d := types.ListValueFrom(ctx, types.StringType, s.AddCapabilities)
		diags.Append(d...)
		m.AddCapabilities = v
	}
	return m
}

// newToken generates a bearer token (the cube's control token, the file server's upload token).
func newToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
