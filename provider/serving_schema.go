package provider

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// servingImage is what Paddle Serving's image adds to the hardened defaults, for the docs.
const servingImage = "Paddle Serving's images run as root: no user and no read-only root filesystem are forced on them. If the image needs a " +
	"capability back (e.g. `tar` restoring file owners needs `CHOWN`), add it with `add_capabilities`."

func servingSchema(ctx context.Context) schema.Schema {
	return schema.Schema{
		MarkdownDescription: "Paddle Serving with the CTR model, reading sparse parameters from `ctr_cube`: a Deployment whose launcher (`cube serving`, " +
			"copied into the pod by an init container) waits for the model, writes Serving's configuration and runs the image's server binary " +
			"with the cube's `cube.conf` (mounted from a ConfigMap at `/serving/conf/cube.conf`), and a Service. A changed " +
			"`cube.conf` rolls the pods (a checksum annotation), because Serving reads it only at start. Apply waits for the rollout.\n\n" +
			"**Pods.** " + hardenedDefaults + " Paddle Serving's images run as root and write inside their own filesystem, " +
			"so neither a non-root user nor a read-only root filesystem is forced on the serving container (the init container runs the cube " +
			"image as its non-root user). `security_context` relaxes these defaults. " +
			"The serving pods carry `app.kubernetes.io/part-of = <stack>`, `app.kubernetes.io/component = serving` and, for each cube their `cube_conf` names, " +
			"`" + stack.CubeClientLabel("<cube>") + " = <cube's namespace>`: that cube's NetworkPolicy admits them to its shards whatever their `stack` and namespace. " +
			"A `cube_conf` that names two cubes of one name in two namespaces is refused.\n\n" +
			fmt.Sprintf("**Disruptions.** A serving that can run more than one pod (`replicas`, or `autoscaling.max_replicas`, of 2 or more) has a "+
				"PodDisruptionBudget of its name: a node drain evicts at most %d of its pods at a time (`maxUnavailable`), and pods that are not "+
				"ready (waiting for their model) may always be evicted, so a drain never waits on them. A serving of one pod has none: it "+
				"could only let its pod go, or block every drain.", stack.ServingMaxUnavailable),
		Attributes: map[string]schema.Attribute{
			"id":        idAttribute(),
			"name":      nameAttribute("Name of the Deployment and Service."),
			"namespace": namespaceAttribute("Namespace."),
			"stack":     stackAttribute("Name of the stack this serving belongs to"),
			// No schema default: the default moves with the provider's image_registry (planned in ModifyPlan).
			"image": schema.StringAttribute{Optional: true, Computed: true, Validators: imageValidators,
				MarkdownDescription: "Paddle Serving image with the CTR model's serving program. Defaults to `" + stack.DefaultServingImage + "` " +
					"(from the provider's `image_registry` when set)."},
			"image_pull_secrets": pullSecretsAttribute("the serving pods"),
			"replicas": schema.Int64Attribute{Optional: true, Computed: true, PlanModifiers: []planmodifier.Int64{replicasUnlessAutoscaled{}},
				MarkdownDescription: fmt.Sprintf("Serving pods. Defaults to `%d`; with `autoscaling` it must not be set (it is null: the "+
					"autoscaler sizes the Deployment).", stack.DefaultServingReplicas),
				Validators: []validator.Int64{int64validator.AtLeast(1)}},
			"autoscaling":         autoscalingAttribute(),
			"port":                portAttribute("Port of the pods and the Service.", stack.DefaultServingPort),
			"service_type":        serviceTypeAttribute(),
			"service_annotations": serviceAnnotationsAttribute("the serving Service"),
			"model_url": schema.StringAttribute{Optional: true, MarkdownDescription: "Where the dense model is fetched from (`MODEL_URL`), a `.tar.gz` of " +
				"the serving model folder on e.g. the training job's file server. Until it exists (404) the pods wait for it, not ready. With `" +
				stack.ModelIDPlaceholder + "` in it (`\"${ctr_training_job.x.file_server_url}/<mount>/serving/" + stack.ModelIDPlaceholder + ".tar.gz\"`) " +
				"and `cube_transfer_url` set, the pods follow the cube: the dense model of each version the cube serves, by its donefile id."},
			"cube_transfer_url": schema.StringAttribute{Optional: true, MarkdownDescription: "`ctr_cube.<name>.transfer_url`: the pods ask the cube's " +
				"transfer which version every shard serves, and put that version's dense model (`model_url` with `" + stack.ModelIDPlaceholder +
				"`) in place for Paddle Serving's reload, without a restart. The dense model follows the embeddings; it is never ahead of them."},
			"wait": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.WaitAvailable),
				Validators: []validator.String{stringvalidator.OneOf(stack.ServingWaits...)},
				MarkdownDescription: "How far apply waits, within `timeouts`: `" + stack.WaitAvailable + "` (the pods are ready: Serving answers, " +
					"which it does once its model is in place) or `" + stack.WaitNone + "`. A create whose wait runs out is a warning that says " +
					"what the pods wait for (a first model takes minutes), not an error: the resource is kept, not tainted. " +
					"Defaults to `" + stack.WaitAvailable + "`."},
			"model_id": schema.StringAttribute{Computed: true, MarkdownDescription: "The donefile id of the dense model every serving pod has in " +
				"place (with `cube_transfer_url`; read from each pod's launcher at refresh), empty while the pods disagree or have none. A plan " +
				"warns when it is not the version the cube serves."},
			"launcher_image": schema.StringAttribute{Optional: true, Validators: imageValidators,
				MarkdownDescription: "Image the init container copies the launcher (`cube`) from into the pod, at `" + stack.ServingLauncherDir + "`. " +
					"Defaults to the cube image of the provider's version (from the provider's `image_registry` when set), the image `ctr_cube` runs."},
			"command": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Container command. Defaults to `" + listDoc(stack.DefaultServingCommand) + "`: the launcher the init container " +
					"installs (see \"The serving contract\" below). Set it for an image that starts its own server."},
			"args": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Container arguments. Defaults to `[\"--port=<port>\", \"--dir=" + stack.ServingWorkDir + "\"]`, the launcher's, " +
					"plus `--gpu-ids=0,…,N-1` when `resources.limits` asks for N `" + stack.GPUResource + "`."},
			"env": schema.MapAttribute{Optional: true, ElementType: types.StringType, DeprecationMessage: deprecatedFor("pod.env"),
				MarkdownDescription: "Deprecated: use `pod.env`. Extra environment variables."},
			"resources": defaultedResourcesAttribute("each serving pod's server", stack.DefaultServingResources,
				"The init container that installs the launcher has its own, "+resourcesDoc(stack.LauncherResources.Requests)+" requested and "+
					resourcesDoc(stack.LauncherResources.Limits)+" as limits."),
			"cube_conf":        schema.StringAttribute{Required: true, MarkdownDescription: "The `cube.conf` to mount: `ctr_cube.<name>.cube_conf`."},
			"security_context": deprecated(securityContextAttribute("the serving pods", servingImage), "pod.security_context"),
			"pod":              podAttribute("the serving pods", servingImage, "Changes roll the serving pods."),
			"kubernetes":       connectionResourceAttribute(),
			"timeouts":         servingTimeouts.attribute(ctx),
			"manifests":        manifestsAttribute(),
			"adopt":            adoptAttribute(),
			"url":              schema.StringAttribute{Computed: true, MarkdownDescription: "In-cluster URL of the serving Service."},
			"load_balancer_address": schema.StringAttribute{Computed: true,
				MarkdownDescription: "Where clients outside the cluster reach Paddle Serving with `service_type = \"LoadBalancer\"`: `HOST:PORT`, " +
					"the load balancer's IP (or, where the cloud gives a name, as AWS does, its hostname) from the Service's " +
					"`status.loadBalancer.ingress[0]`, and the Service's `port`. " + loadBalancerWaitDoc},
		},
	}
}

// autoscalingAttribute is ctr_serving's `autoscaling`.
func autoscalingAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: "Sizes the serving Deployment with a HorizontalPodAutoscaler (`autoscaling/v2`, of the serving's name) instead of `replicas`: " +
			"the Deployment is applied without `spec.replicas`, which is the autoscaler's, so its scaling is neither drift in `manifests` nor undone " +
			"by an apply. Setting it on a serving that has `replicas` keeps the pods it runs (the autoscaler takes over from there); removing it " +
			"deletes the autoscaler and sizes the Deployment by `replicas` again. Each utilization target is a percentage of the pods' request " +
			"of that resource, which the pods always have (`resources`, with its defaults). The autoscaler reads utilization from the cluster's metrics API (e.g. metrics-server).",
		Attributes: map[string]schema.Attribute{
			"min_replicas": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(stack.DefaultServingReplicas),
				Validators:          []validator.Int64{int64validator.AtLeast(1)},
				MarkdownDescription: fmt.Sprintf("Fewest pods. Defaults to `%d`; at most `max_replicas`.", stack.DefaultServingReplicas)},
			"max_replicas": schema.Int64Attribute{Required: true, Validators: []validator.Int64{int64validator.AtLeast(1)},
				MarkdownDescription: "Most pods."},
			"target_cpu_utilization": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64validator.AtLeast(1)},
				MarkdownDescription: fmt.Sprintf("Average CPU use to keep, in percent of the pods' CPU request. Defaults to `%d` when "+
					"`target_memory_utilization` is not set either.", stack.DefaultTargetCPUUtilization)},
			"target_memory_utilization": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64validator.AtLeast(1)},
				MarkdownDescription: "Average memory use to keep, in percent of the pods' memory request. None by default."},
		}}
}

// replicasUnlessAutoscaled plans an unset `replicas`: stack.DefaultServingReplicas, or null
// with `autoscaling`, whose autoscaler sizes the Deployment.
type replicasUnlessAutoscaled struct{}

func (replicasUnlessAutoscaled) Description(context.Context) string {
	return fmt.Sprintf("Defaults to %d, or null with autoscaling.", stack.DefaultServingReplicas)
}

func (m replicasUnlessAutoscaled) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}

func (replicasUnlessAutoscaled) PlanModifyInt64(ctx context.Context, req planmodifier.Int64Request, resp *planmodifier.Int64Response) {
	if !req.ConfigValue.IsNull() {
		return
	}
	var autoscaling types.Object
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("autoscaling"), &autoscaling)...)
	if autoscaling.IsUnknown() {
		resp.PlanValue = types.Int64Unknown()
		return
	}
	resp.PlanValue = plannedReplicas(!autoscaling.IsNull(), types.Int64Value(stack.DefaultServingReplicas))
}

// plannedReplicas is `replicas`: fixed, or null when autoscaled.
func plannedReplicas(autoscaled bool, fixed types.Int64) types.Int64 {
	if autoscaled {
		return types.Int64Null()
	}
	return fixed
}

// listDoc writes a list of strings as HCL does, for the docs: ["a", "b"].
func listDoc(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}
