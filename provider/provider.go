// Package provider is the Terraform layer of the ctr provider: the provider configuration and,
// per resource, a schema, a model and a CRUD file, with the lifecycle the workload resources
// share in workload.go. Object building lives in internal/stack and cluster access in
// internal/kube; this package only translates between Terraform and them.
package provider

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/internal/volcano"
	"github.com/elasticctr/terraform-provider-ctr/provider/internal/diagnostics"
)

var _ provider.Provider = (*ctrProvider)(nil)

// New returns the provider factory for providerserver.Serve and tests.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &ctrProvider{version: version} }
}

type ctrProvider struct {
	version string
}

// providerData is what Configure hands to every resource. Nothing in it has contacted a
// server: `terraform validate` and `plan` work without a cluster or cloud credentials.
type providerData struct {
	version string
	conn    providerConnection // the connection of resources that set none of their own
	baidu   baiduCredentials
	// imageRegistry moves every default image to a mirror or private registry (stack.Images).
	imageRegistry string
	// registryUnknown: image_registry is known only after apply (it comes from a resource
	// created in the same run), and so are the default images and the objects they are in.
	registryUnknown bool
	// manifests are the release manifests (Volcano's) this provider run has downloaded.
	manifests *volcano.ManifestCache
	// queues are the Volcano queues that ctr_queue resources plan to create in this run.
	queues *plannedQueues
}

// plannedQueues are the names of the queues this provider run plans to create. Terraform
// plans a training job after the ctr_queue it references, with the same configured provider,
// so a job's queue check finds its queue here before the queue exists. Resources are planned
// concurrently: the mutex orders the queue's note and the job's look.
type plannedQueues struct {
	mu    sync.Mutex
	names map[string]bool
}

func (p *plannedQueues) plan(name string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.names == nil {
		p.names = map[string]bool{}
	}
	p.names[name] = true
}

func (p *plannedQueues) planned(name string) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.names[name]
}

// baiduCredentials are the Baidu Cloud (BCE) credentials ctr_cluster uses for CCE.
type baiduCredentials struct {
	AccessKey, SecretKey, SessionToken, Region, CCEEndpoint string
	// PollInterval is how often CCE is polled while waiting; 0 means the default.
	PollInterval time.Duration
}

func (p *ctrProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = providerTypeName
	resp.Version = p.version
}

func (p *ctrProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The `ctr` provider stands up an elastic click-through-rate (CTR) training and serving " +
			"stack on Kubernetes: PaddlePaddle parameter-server training on Volcano, the cube sparse-parameter " +
			"service and Paddle Serving. Nothing is contacted when the provider is configured, so `terraform " +
			"validate` and `terraform plan` of new resources work without a cluster.",
		Attributes: map[string]schema.Attribute{
			"access_key": schema.StringAttribute{
				MarkdownDescription: "Baidu Cloud access key ID for CCE. Defaults to the `BCE_ACCESS_KEY_ID` environment variable.",
				Optional:            true,
			},
			"secret_key": schema.StringAttribute{
				MarkdownDescription: "Baidu Cloud secret access key. Defaults to the `BCE_SECRET_ACCESS_KEY` environment variable.",
				Optional:            true,
				Sensitive:           true,
			},
			"session_token": schema.StringAttribute{
				MarkdownDescription: "Baidu Cloud STS session token, for temporary credentials. Defaults to `BCE_SESSION_TOKEN`.",
				Optional:            true,
				Sensitive:           true,
			},
			"region": schema.StringAttribute{
				MarkdownDescription: "Baidu Cloud region, e.g. `bj` or `gz`. Defaults to `BCE_REGION`, else `bj`.",
				Optional:            true,
			},
			"cce_endpoint": schema.StringAttribute{
				MarkdownDescription: "CCE API endpoint override (a mirror or a test emulator). Defaults to `BCE_CCE_ENDPOINT`, " +
					"else the public endpoint of the region.",
				Optional: true,
			},
			"cce_poll_interval": schema.StringAttribute{
				MarkdownDescription: "How often CCE is polled while waiting for a cluster or worker pool (CCE has no watch API), " +
					"a Go duration such as `5s`. Defaults to `5s`.",
				Optional: true,
			},
			"kubernetes": connectionProviderAttribute(),
			"image_registry": schema.StringAttribute{Optional: true,
				Validators: []validator.String{stringvalidator.RegexMatches(stack.RegistryPattern, stack.RegistryRule)},
				MarkdownDescription: "A mirror or private registry for every default image, as Helm charts' `global.imageRegistry`: it " +
					"replaces the registry of each image a resource uses when its own `image` is unset (the training image `" + stack.DefaultImage +
					"`, Paddle Serving's `" + stack.DefaultServingImage + "`, this repository's `" + stack.CubeImageRepository + ":<version>` for " +
					"`ctr_cube` and the file server) and of every image of the Volcano release `ctr_cluster` installs (at install and upgrade), keeping the repository " +
					"path and tag: `registry.example.com:5000` pulls `" + stack.DefaultImage + "` as `registry.example.com:5000/" + stack.DefaultImage +
					"` (Docker Hub's official images under `library/`). Images set explicitly are used as they are. The registry must serve " +
					"those paths (a pull-through cache, or copies pushed there); give pods credentials with each resource's `image_pull_secrets`. " +
					"Changing it changes the images of the training jobs (which are replaced) and of Paddle Serving; a `ctr_cube` keeps the image " +
					"it was created with.",
			},
		},
	}
}

type providerModel struct {
	AccessKey    types.String `tfsdk:"access_key"`
	SecretKey    types.String `tfsdk:"secret_key"`
	SessionToken types.String `tfsdk:"session_token"`
	Region       types.String `tfsdk:"region"`
	CCEEndpoint  types.String `tfsdk:"cce_endpoint"`
	PollInterval types.String `tfsdk:"cce_poll_interval"`
	Kubernetes   types.Object `tfsdk:"kubernetes"`
	Registry     types.String `tfsdk:"image_registry"`
}

func (p *ctrProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	conn, d := providerConnectionFrom(ctx, m.Kubernetes)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	var poll time.Duration
	if v := m.PollInterval.ValueString(); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			resp.Diagnostics.Append(diagnostics.InvalidSetting("Provider", path.Root("cce_poll_interval"),
				fmt.Sprintf("%q is not a positive duration such as 5s or 500ms.", v)))
			return
		}
		poll = d
	}
	data := &providerData{
		version:         p.version,
		conn:            conn,
		imageRegistry:   m.Registry.ValueString(),
		registryUnknown: m.Registry.IsUnknown(),
		manifests:       &volcano.ManifestCache{},
		queues:          &plannedQueues{},
		baidu: baiduCredentials{
			AccessKey:    stringOr(m.AccessKey, os.Getenv("BCE_ACCESS_KEY_ID")),
			SecretKey:    stringOr(m.SecretKey, os.Getenv("BCE_SECRET_ACCESS_KEY")),
			SessionToken: stringOr(m.SessionToken, os.Getenv("BCE_SESSION_TOKEN")),
			Region:       stringOr(m.Region, envOr("BCE_REGION", "bj")),
			CCEEndpoint:  stringOr(m.CCEEndpoint, os.Getenv("BCE_CCE_ENDPOINT")),
			PollInterval: poll,
		},
	}
	resp.ResourceData = data
	resp.DataSourceData = data
}

// ctrResource is what every resource of the provider implements: besides CRUD, its
// configuration checked as a whole, a plan it completes (warnings, replacements, values
// known only after apply), and import.
type ctrResource interface {
	resource.ResourceWithConfigure
	resource.ResourceWithValidateConfig
	resource.ResourceWithModifyPlan
	resource.ResourceWithImportState
	resource.ResourceWithIdentity
}

var (
	_ ctrResource = (*clusterResource)(nil)
	_ ctrResource = (*cubeResource)(nil)
	_ ctrResource = (*namespaceResource)(nil)
	_ ctrResource = (*queueResource)(nil)
	_ ctrResource = (*servingResource)(nil)
	_ ctrResource = (*trainingJobResource)(nil)
)

func (p *ctrProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		NewClusterResource,
		NewCubeResource,
		NewNamespaceResource,
		NewQueueResource,
		NewServingResource,
		NewTrainingJobResource,
	}
}

// providerTypeName is the provider's name, the prefix of every resource and data source type.
const providerTypeName = "ctr"

func (p *ctrProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		NewCubeDataSource,
		NewServingDataSource,
		NewTrainingJobDataSource,
	}
}

func stringOr(v types.String, fallback string) string {
	if v.IsNull() || v.IsUnknown() || v.ValueString() == "" {
		return fallback
	}
	return v.ValueString()
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
