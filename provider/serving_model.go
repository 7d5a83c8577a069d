package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

// servingModel is the Terraform state of ctr_serving.
type servingModel struct {
	workloadAttrs
	Image           types.String          `tfsdk:"image"`
	PullSecrets     types.List            `tfsdk:"image_pull_secrets"`
	Replicas        types.Int64           `tfsdk:"replicas"`
	Autoscaling     *autoscalingModel     `tfsdk:"autoscaling"`
	Port            types.Int64           `tfsdk:"port"`
	ServiceType     types.String          `tfsdk:"service_type"`
	ServiceAnnots   types.Map             `tfsdk:"service_annotations"`
	ModelURL        types.String          `tfsdk:"model_url"`
	LauncherImage   types.String          `tfsdk:"launcher_image"`
	CubeTransferURL types.String          `tfsdk:"cube_transfer_url"`
	Wait            types.String          `tfsdk:"wait"`
	ModelID         types.String          `tfsdk:"model_id"`
	Command         types.List            `tfsdk:"command"`
	Args            types.List            `tfsdk:"args"`
	Env             types.Map             `tfsdk:"env"`
	Resources       *resourcesModel       `tfsdk:"resources"`
	SecurityContext *securityContextModel `tfsdk:"security_context"`
	Pod             *podModel             `tfsdk:"pod"`
	CubeConf        types.String          `tfsdk:"cube_conf"`
	URL             types.String          `tfsdk:"url"`
	LoadBalancer    types.String          `tfsdk:"load_balancer_address"`
}

var _ workloadModel[stack.Serving] = (*servingModel)(nil)

func (m *servingModel) settings(ctx context.Context, images stack.Images) (stack.Serving, diag.Diagnostics) {
	var diags diag.Diagnostics
	s := stack.Serving{Name: m.Name.ValueString(), Namespace: m.Namespace.ValueString(), Stack: m.Stack.ValueString(), Image: m.Image.ValueString(),
		Replicas: int32(m.Replicas.ValueInt64()), Port: int32(m.Port.ValueInt64()), ServiceType: m.ServiceType.ValueString(),
		ModelURL: m.ModelURL.ValueString(), CubeConf: m.CubeConf.ValueString(),
		LauncherImage: m.LauncherImage.ValueString(), ProviderVersion: images.ProviderVersion, ImageRegistry: images.Registry,
		CubeTransferURL: m.CubeTransferURL.ValueString(), Wait: m.Wait.ValueString(),
		ServiceAnnotations: stringMap(ctx, m.ServiceAnnots, &diags),
		Command:            stringList(ctx, m.Command, &diags),
		Args:               stringList(ctx, m.Args, &diags), Env: stringMap(ctx, m.Env, &diags), ImagePullSecrets: stringList(ctx, m.PullSecrets, &diags)}
	s.Requests, s.Limits = m.Resources.stack(ctx, &diags)
	s.SecurityContext = m.SecurityContext.stack(ctx, &diags)
	s.Pod = m.Pod.stack(ctx, &diags)
	s.Autoscaling = m.Autoscaling.stack()
	return s, diags
}

func (m *servingModel) setComputed(_ context.Context, s stack.Serving, _ *diag.Diagnostics) {
	m.ID = namespaceName(s.Namespace, s.Name)
	m.URL = types.StringValue(s.URL())
}

func (m *servingModel) fromCluster(ctx context.Context, kc *kube.Client, diags *diag.Diagnostics) bool {
	ref := stack.ServingDeploymentRef(m.Namespace.ValueString(), m.Name.ValueString())
	s, live, ok := settingsFromCluster(ctx, kc, ref, "Serving", stack.ServingFromSettings, diags)
	if !ok {
		return false
	}
	s.RestoreEnv(live)
	m.Name, m.Namespace, m.Stack, m.Image = types.StringValue(s.Name), types.StringValue(s.Namespace), optionalString(s.Stack), optionalString(s.Image)
	m.Replicas, m.Port, m.ServiceType = plannedReplicas(s.Autoscaling != nil, types.Int64Value(int64(s.Defaulted().Replicas))), types.Int64Value(int64(s.Port)), optionalString(s.ServiceType)
	m.Autoscaling = autoscalingFromStack(s.Autoscaling)
	m.ModelURL, m.CubeConf, m.Env = optionalString(s.ModelURL), types.StringValue(s.CubeConf), optionalStringMap(ctx, s.Env, diags)
	m.LauncherImage, m.CubeTransferURL = optionalString(s.LauncherImage), optionalString(s.CubeTransferURL)
	m.Wait = types.StringValue(s.Defaulted().Wait)
	m.Args, m.Command = optionalStringList(ctx, s.Args, diags), optionalStringList(ctx, s.Command, diags)
	m.ServiceAnnots = optionalStringMap(ctx, s.ServiceAnnotations, diags)
	m.PullSecrets = optionalStringList(ctx, s.ImagePullSecrets, diags)
	m.Resources = resourcesFromStack(ctx, s.Requests, s.Limits, diags)
	m.SecurityContext = securityContextFromStack(ctx, s.SecurityContext, diags)
	m.Pod = podFromStack(ctx, s.Pod, diags)
	return !diags.HasError()
}

// autoscalingModel is ctr_serving's `autoscaling`.
type autoscalingModel struct {
	MinReplicas             types.Int64 `tfsdk:"min_replicas"`
	MaxReplicas             types.Int64 `tfsdk:"max_replicas"`
	TargetCPUUtilization    types.Int64 `tfsdk:"target_cpu_utilization"`
	TargetMemoryUtilization types.Int64 `tfsdk:"target_memory_utilization"`
}

func (a *autoscalingModel) stack() *stack.Autoscaling {
	if a == nil {
		return nil
	}
	return &stack.Autoscaling{MinReplicas: int32(a.MinReplicas.ValueInt64()), MaxReplicas: int32(a.MaxReplicas.ValueInt64()),
		TargetCPUUtilization: int32(a.TargetCPUUtilization.ValueInt64()), TargetMemoryUtilization: int32(a.TargetMemoryUtilization.ValueInt64())}
}

func autoscalingFromStack(a *stack.Autoscaling) *autoscalingModel {
	if a == nil {
		return nil
	}
	optional := func(v int32) types.Int64 {
		if v == 0 {
			return types.Int64Null()
		}
		return types.Int64Value(int64(v))
	}
	return &autoscalingModel{MinReplicas: types.Int64Value(int64(a.Defaulted().MinReplicas)), MaxReplicas: types.Int64Value(int64(a.MaxReplicas)),
		TargetCPUUtilization: optional(a.TargetCPUUtilization), TargetMemoryUtilization: optional(a.TargetMemoryUtilization)}
}

// readLive reads the load balancer's address, and the dense model the pods serve (and how
// it stands against the cube's).
func (m *servingModel) readLive(ctx context.Context, kc *kube.Client, s stack.Serving, live map[string]*unstructured.Unstructured, diags *diag.Diagnostics) {
	m.LoadBalancer = liveAddress(live[stack.ServingServiceKey(s.Name)], hostPort)
	m.ModelID = types.StringValue(readModelID(ctx, kc, s, live[stack.ServingDeploymentKey(s.Name)], diags))
}

// settingsFromCluster reads the settings annotation of a resource's primary object (ref):
// false, without an error, when the object does not exist. It returns the object too, which
// holds what the annotation leaves out (env values).
func settingsFromCluster[S any](ctx context.Context, kc *kube.Client, ref *unstructured.Unstructured, kind string,
	decode func(string) (S, error), diags *diag.Diagnostics) (S, *unstructured.Unstructured, bool) {
	var s S
	live, err := kc.Get(ctx, ref)
	if err != nil {
		diags.Append(diagnostics.Failed("Import "+kind+" Error", "Could not read "+kube.Describe(ref), "", err))
		return s, nil, false
	}
	if live == nil {
		return s, nil, false
	}
	s, err = decode(live.GetAnnotations()[stack.SettingsAnnotation])
	if err != nil {
		diags.Append(diagnostics.Failed("Import "+kind+" Error",
			fmt.Sprintf("%s was not created by this provider (its %s annotation is missing or unreadable)", kube.Describe(ref), stack.SettingsAnnotation),
			"Import only what this provider created.", err))
		return s, nil, false
	}
	return s, live, true
}
