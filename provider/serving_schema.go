package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

func servingSchema(ctx context.Context) schema.Schema {
	return schema.Schema{
		MarkdownDescription: "Paddle Serving with the CTR model, reading sparse parameters from `ctr_cube`: a Deployment started with " +
			"`--enable_cube=true`, the cube's `cube.conf` mounted from a ConfigMap at `/serving/conf/cube.conf`, and a Service. A changed " +
			"`cube.conf` rolls the pods (a checksum annotation), because Serving reads it only at start. Apply waits for the rollout.\n\n" +
			"**Pods.** " + hardenedDefaults + " Paddle Serving's images run as root and write inside their own filesystem (the unpacked model), " +
			"so neither a non-root user nor a read-only root filesystem is forced. `security_context` relaxes these defaults. " +
			"The serving pods carry `app.kubernetes.io/part-of = <stack>` and `app.kubernetes.io/component = serving`: a `ctr_cube` with the " +
			"same `stack` in the same namespace admits exactly these pods to its shards through its NetworkPolicy.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "`namespace/name`.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, PlanModifiers: replaceStr(), MarkdownDescription: "Name of the Deployment and Service.",
				Validators: []validator.String{stringvalidator.LengthBetween(1, stack.MaxNameLength),
					stringvalidator.RegexMatches(dnsLabelRE, "must be lowercase letters, digits and '-', starting and ending with a letter or digit")}},
			"namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("default"), PlanModifiers: replaceStr(),
				MarkdownDescription: "Namespace. Defaults to `default`."},
			"stack": schema.StringAttribute{Optional: true, MarkdownDescription: "The `app.kubernetes.io/part-of` label. Defaults to `name`."},
			"image": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultServingImage),
				MarkdownDescription: "Paddle Serving image with the CTR model's serving program. Defaults to `" + stack.DefaultServingImage + "`."},
			"replicas": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1), MarkdownDescription: "Serving pods. Defaults to `1`.",
				Validators: []validator.Int64{int64validator.AtLeast(1)}},
			"port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(stack.DefaultServingPort),
				MarkdownDescription: fmt.Sprintf("Port of the pods and the Service. Defaults to `%d`.", stack.DefaultServingPort), Validators: []validator.Int64{int64validator.Between(1, 65535)}},
			"service_type": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("ClusterIP"),
				MarkdownDescription: "One of " + quoted(stack.ServiceTypes) + ". Defaults to `ClusterIP`.", Validators: []validator.String{stringvalidator.OneOf(stack.ServiceTypes...)}},
			"model_url": schema.StringAttribute{Optional: true, MarkdownDescription: "Where the dense model is fetched from (`MODEL_URL`), e.g. the training job's file server."},
			"args": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Container arguments. Defaults to `[\"--port=<port>\", \"--enable_cube=true\"]`."},
			"env": schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "Extra environment variables."},
			"resources": schema.SingleNestedAttribute{Optional: true, MarkdownDescription: "Requests and limits of each pod.",
				Attributes: map[string]schema.Attribute{
					"requests": schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "e.g. `{ cpu = \"4\" }`."},
					"limits":   schema.MapAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "e.g. `{ memory = \"8Gi\" }`."},
				}},
			"cube_conf": schema.StringAttribute{Required: true, MarkdownDescription: "The `cube.conf` to mount: `ctr_cube.<name>.cube_conf`."},
			"security_context": securityContextAttribute("the serving pods",
				"Paddle Serving's images run as root: no user and no read-only root filesystem are forced on them. If the image needs a "+
					"capability back (e.g. `tar` restoring file owners needs `CHOWN`), add it with `add_capabilities`."),
			"kubernetes": connectionResourceAttribute(),
			"timeouts":   timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
			"manifests": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Every Kubernetes object this resource owns, `apiVersion/Kind/name` -> YAML, rendered at plan time."},
			"url": schema.StringAttribute{Computed: true, MarkdownDescription: "In-cluster URL of the serving Service."},
		},
	}
}
