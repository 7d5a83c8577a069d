package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/volcano"
)

// DefaultVolcanoVersion is the Volcano release installed when none is given.
const DefaultVolcanoVersion = "v1.14.1"

// volcanoManifestURL is where a Volcano release's all-in-one manifest lives.
func volcanoManifestURL(version string) string {
	return "https://raw.githubusercontent.com/volcano-sh/volcano/" + version + "/installer/volcano-development.yaml"
}

const cceReplace = "Changing it creates a new CCE cluster."

// Defaults of a CCE cluster: what a configuration without them asks CCE for (and what import
// leaves out of the configuration).
const (
	defaultRuntime        = "containerd"
	defaultMasterType     = "managedPro"
	defaultMasterFlavor   = "l50"
	defaultPoolName       = "workers"
	defaultRootDiskSize   = 100
	minRootDiskSize       = 20
	defaultKubeconfigType = "vpc"
)

func clusterSchema(ctx context.Context) schema.Schema {
	str := func(desc string, required bool) schema.StringAttribute {
		return schema.StringAttribute{Required: required, Optional: !required, MarkdownDescription: desc + " " + cceReplace,
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}}
	}
	return schema.Schema{
		MarkdownDescription: "The cluster the stack runs on, with Volcano installed and ready. Either `cce`: create a Baidu Cloud CCE " +
			"cluster with a worker pool, or `kubernetes`: adopt an existing cluster on any cloud and only manage Volcano on it (a Volcano " +
			"already there is left alone unless `volcano.mode` says otherwise). " +
			"Its `kubernetes` attribute configures the provider that connects the workloads (`provider \"ctr\" { kubernetes = " +
			"ctr_cluster.this.kubernetes }`, with this resource on a provider alias), so one `terraform apply` builds the cluster " +
			"and everything on it.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The CCE cluster ID, or `existing/<API server host>` for an adopted cluster.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"cce": schema.SingleNestedAttribute{
				Optional: true,
				MarkdownDescription: "Create a CCE cluster. Versions, runtimes, network modes and flavors are not checked against a list " +
					"of ours: CCE judges them at apply time and its message is shown. A change of an attribute marked \"" + cceReplace + "\" " +
					"deletes the cluster with everything on it: the plan says so in a warning that names the attributes.",
				Validators: []validator.Object{objectvalidator.ExactlyOneOf(path.MatchRoot("cce"), path.MatchRoot("kubernetes"))},
				Attributes: map[string]schema.Attribute{
					"name":            str("Cluster name.", true),
					"description":     str("Cluster description.", false),
					"k8s_version":     str("Kubernetes version, e.g. `1.34.2`.", true),
					"runtime":         schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultRuntime), MarkdownDescription: "Container runtime. Defaults to `" + defaultRuntime + "`. " + cceReplace, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
					"runtime_version": str("Runtime version; CCE's default when unset.", false),
					"vpc_id":          str("VPC of the cluster, `vpc-...`.", true),
					"network_mode":    str("Container network mode, e.g. `vpc-eni` or `vpc-route-auto-detect`; CCE's default when unset.", false),
					"pod_cidr":        str("Pod CIDR (route modes).", false),
					"service_cidr":    str("ClusterIP Service CIDR.", false),
					"master": schema.SingleNestedAttribute{Optional: true, MarkdownDescription: "Managed master. " + cceReplace,
						PlanModifiers: []planmodifier.Object{objectplanmodifier.RequiresReplace()},
						Attributes: map[string]schema.Attribute{
							"type":           schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultMasterType), MarkdownDescription: "Master type. Defaults to `" + defaultMasterType + "`."},
							"flavor":         schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultMasterFlavor), MarkdownDescription: "Managed master flavor (cluster size class), e.g. `l50`. Defaults to `" + defaultMasterFlavor + "`."},
							"zone":           schema.StringAttribute{Optional: true, MarkdownDescription: "Zone of the master's subnet, e.g. `zoneA`."},
							"subnet_id":      schema.StringAttribute{Optional: true, MarkdownDescription: "Subnet of the API server's load balancer."},
							"exposed_public": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false), MarkdownDescription: "Give the API server a public address. Defaults to `false`."},
						}},
					"worker_pool": schema.SingleNestedAttribute{Required: true,
						MarkdownDescription: "The worker instance group. `replicas`, `labels`, `taints` and `root_disk_size` change in place through CCE's " +
							"API, and a change made in the console shows as drift; every other setting creates a new cluster.",
						Attributes: map[string]schema.Attribute{
							"id":       schema.StringAttribute{Computed: true, MarkdownDescription: "Instance group ID.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
							"name":     schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultPoolName), MarkdownDescription: "Instance group name. Defaults to `" + defaultPoolName + "`.", PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
							"replicas": schema.Int64Attribute{Required: true, MarkdownDescription: "Number of worker machines, at least 1 (Volcano's own pods need a node). Changes in place; drift (scaling in the console) shows in the plan.", Validators: []validator.Int64{int64validator.AtLeast(1)}},
							"machine_spec": schema.StringAttribute{Required: true, MarkdownDescription: "BCC machine spec, e.g. `bcc.g5.c8m32`.",
								PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}, Validators: []validator.String{stringvalidator.LengthAtLeast(1)}},
							"instance_type":     str("BCC instance type, e.g. `N5`.", false),
							"subnet_id":         str("Subnet of the workers, `sbn-...`.", true),
							"security_group_id": str("Security group of the workers.", false),
							"zone":              str("Availability zone, e.g. `zoneA`.", false),
							"root_disk_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(defaultRootDiskSize), MarkdownDescription: fmt.Sprintf("Root disk size in GB, at least %d. Defaults to `%d`. Changes in place: CCE's pool template "+
								"changes, and the machines it creates from then on get the new size (existing machines keep their disks).", minRootDiskSize, defaultRootDiskSize), Validators: []validator.Int64{int64validator.AtLeast(minRootDiskSize)}},
							"image_id": str("OS image ID; CCE's default when unset.", false),
							"labels": schema.MapAttribute{Optional: true, ElementType: types.StringType,
								MarkdownDescription: "Kubernetes labels of the nodes. Changes in place, on the existing nodes too (CCE's `syncMeta`)."},
							"taints": schema.ListNestedAttribute{Optional: true, MarkdownDescription: "Kubernetes taints of the nodes. Changes in place, on the existing nodes too (CCE's `syncMeta`).",
								NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
									"key":    schema.StringAttribute{Required: true, MarkdownDescription: "Taint key."},
									"value":  schema.StringAttribute{Optional: true, MarkdownDescription: "Taint value."},
									"effect": schema.StringAttribute{Required: true, MarkdownDescription: "`NoSchedule`, `PreferNoSchedule` or `NoExecute`.", Validators: []validator.String{stringvalidator.OneOf("NoSchedule", "PreferNoSchedule", "NoExecute")}},
								}}},
							"admin_password": schema.StringAttribute{Optional: true, Sensitive: true, WriteOnly: true,
								MarkdownDescription: "Root password of the machines. Write-only: sent to CCE at creation, never stored in state or shown in plans."},
							"ssh_key_id": str("SSH key pair ID for the machines.", false),
						}},
					"kubeconfig_type":     schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultKubeconfigType), MarkdownDescription: "Which kubeconfig to export: `vpc` (API server's VPC address; Terraform must run in the VPC) or `public` (needs `master.exposed_public`). Defaults to `" + defaultKubeconfigType + "`. Changes in place: the kubeconfig is read again, and `kubeconfig` and `kubernetes` change with it."},
					"delete_resource":     schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true), MarkdownDescription: "On destroy, release the worker machines too. Defaults to `true`."},
					"delete_cds_snapshot": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true), MarkdownDescription: "On destroy, delete the machines' disk snapshots. Defaults to `true`."},
				},
			},
			"kubernetes": schema.SingleNestedAttribute{
				Optional: true, Computed: true,
				MarkdownDescription: "The connection to the cluster. Set it to adopt an existing cluster (any cloud): it is stored in state " +
					"and used as stored when destroy uninstalls Volcano, so it takes a kubeconfig or `exec`, not a static token. With `cce` it " +
					"is computed from the new cluster's kubeconfig (host, CA, and its client certificate and key: sensitive, in this resource's " +
					"state only) for the provider: `provider \"ctr\" { kubernetes = ctr_cluster.this.kubernetes }`.",
				PlanModifiers: []planmodifier.Object{objectplanmodifier.UseStateForUnknown()},
				Validators:    connectionResourceAttribute().Validators,
				Attributes:    connectionResourceAttribute().Attributes,
			},
			"volcano": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "What to do with Volcano on the cluster. Without this block: install " + DefaultVolcanoVersion +
					" when the cluster has no Volcano, and leave an existing install alone (`mode = \"" + string(volcano.IfAbsent) + "\"`).",
				Attributes: map[string]schema.Attribute{
					"mode": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(string(volcano.IfAbsent)),
						Validators: []validator.String{stringvalidator.OneOf(volcanoModes()...)},
						MarkdownDescription: "`" + string(volcano.IfAbsent) + "` (the default): install the release when the cluster has no Volcano " +
							"(no `jobs.batch.volcano.sh` CRD and no `volcano-system/volcano-scheduler` Deployment); an existing install is left " +
							"alone, never changed or removed (`volcano_state = \"existing\"`). `" + string(volcano.Adopt) + "`: install the release, " +
							"over an existing install if there is one, taking its objects over (server-side apply with force): from then on ctr " +
							"upgrades them and repairs their drift, and destroy hands them back (ctr's labels come off) instead of deleting them. `" +
							string(volcano.None) + "`: do not manage Volcano at all; switching to it hands back everything ctr managed, deleting nothing. " +
							"Switching between `" + string(volcano.IfAbsent) + "` and `" + string(volcano.Adopt) + "` once ctr manages Volcano changes nothing on the cluster."},
					"version": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(DefaultVolcanoVersion),
						MarkdownDescription: "Volcano release, e.g. `" + DefaultVolcanoVersion + "`. Changing it upgrades an install ctr manages in place; an existing install that is not ctr's is not upgraded."},
					"manifest_url": schema.StringAttribute{Optional: true, Validators: []validator.String{manifestURLValidator},
						MarkdownDescription: "Where to fetch the manifest (`https://`, `http://` or `file://`), for mirrors and air-gapped sites. " +
							"Defaults to the release's `installer/volcano-development.yaml` on GitHub. Refresh reads it again to detect drift."},
					"keep_on_destroy": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
						MarkdownDescription: "Leave Volcano as it is (labels included) when this resource is destroyed. Defaults to `false`: " +
							"destroy deletes what ctr created and hands back what it adopted."},
				}},
			"timeouts":   clusterTimeouts.attribute(ctx),
			"cluster_id": schema.StringAttribute{Computed: true, MarkdownDescription: "CCE cluster ID (empty for an adopted cluster).", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"phase":      schema.StringAttribute{Computed: true, MarkdownDescription: "CCE cluster phase when last read (`running`, …); `adopted` for an existing cluster."},
			"kubeconfig": schema.StringAttribute{Computed: true, Sensitive: true, MarkdownDescription: "Kubeconfig of the CCE cluster (empty for an adopted cluster).", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"volcano_state": schema.StringAttribute{Computed: true,
				MarkdownDescription: "Whose the cluster's Volcano is: `installed` (ctr installed it on a cluster that had none), `adopted` (it was there " +
					"and ctr took it over, `mode = \"adopt\"`), `existing` (it is there and not ctr's: left alone), or `absent`. A refresh that " +
					"finds an `existing` install gone says `absent`, and the next apply installs it (unless `mode = \"none\"`)."},
			"volcano_version": schema.StringAttribute{Computed: true,
				MarkdownDescription: "The Volcano release: the one ctr installed, or for an `existing` install the tag of its scheduler's image (null when that says none)."},
			"volcano_objects": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The objects of the Volcano manifest that ctr created (`apiVersion/Kind/[namespace/]name`): what destroy deletes."},
			"volcano_adopted_objects": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The objects of the Volcano manifest that were on the cluster before ctr applied it (`mode = \"adopt\"`, or a " +
					"namespace someone created): ctr manages them like the others, and destroy hands them back (removes ctr's labels and " +
					"annotations) instead of deleting them."},
			"volcano_drift": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "What a refresh found changed outside Terraform in the Volcano objects ctr manages, one line per object " +
					"(`<object>: <field>, ...` or `<object>: deleted`). The plan shows it going to `[]`: the apply restores the manifest's values."},
		},
	}
}

// volcanoModes are the values of volcano.mode.
func volcanoModes() []string {
	out := make([]string, len(volcano.Modes))
	for i, m := range volcano.Modes {
		out[i] = string(m)
	}
	return out
}
