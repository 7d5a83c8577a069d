package provider

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
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
			"A `cube_conf` that names two cubes of one name in two namespaces is refused.",
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
			"replicas": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(stack.DefaultServingReplicas),
				MarkdownDescription: fmt.Sprintf("Serving pods. Defaults to `%d`.", stack.DefaultServingReplicas),
				Validators:          []validator.Int64{int64validator.AtLeast(1)}},
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
			"resources": schema.SingleNestedAttribute{Optional: true, MarkdownDescription: "Requests and limits of each pod.",
				Attributes: map[string]schema.Attribute{
					"requests": schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "e.g. `{ cpu = \"4\" }`."},
					"limits":   schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "e.g. `{ memory = \"8Gi\" }`."},
				}},
			"cube_conf":        schema.StringAttribute{Required: true, MarkdownDescription: "The `cube.conf` to mount: `ctr_cube.<name>.cube_conf`."},
			"security_context": deprecated(securityContextAttribute("the serving pods", servingImage), "pod.security_context"),
			"pod":              podAttribute("the serving pods", servingImage, "Changes roll the serving pods."),
			"kubernetes":       connectionResourceAttribute(),
			"timeouts":         timeoutsAttribute(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
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

// listDoc writes a list of strings as HCL does, for the docs: ["a", "b"].
func listDoc(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}
