package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// cubeImage is what this repository's image adds to the hardened defaults, for the docs.
const cubeImage = "This repository's image also runs as user and group 65532 with `runAsNonRoot`, `fsGroup` 65532 and a read-only root filesystem."

// storageGuideLink ends the description of each attribute that names a claim's StorageClass
// (the claims the storage guide lists).
const storageGuideLink = " See the guide [Storage](../guides/storage.md) for what each cloud needs."

func cubeSchema(ctx context.Context) schema.Schema {
	num := func(desc string, def int64, min, max int64) schema.Int64Attribute {
		return schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(def),
			MarkdownDescription: fmt.Sprintf("%s From %d to %d. Defaults to `%d`.", desc, min, max, def), Validators: []validator.Int64{int64validator.Between(min, max)}}
	}
	return schema.Schema{
		MarkdownDescription: "The cube sparse-parameter service: `shards` × `replicas` cube servers (one StatefulSet and one headless " +
			"Service per shard, so that shard i has a stable name), the transfer that watches the training job's donefile and rolls new " +
			"model versions out to every replica, and the shared control token. Exports the `cube_conf` Paddle Serving reads.\n\n" +
			"**Network policies.** Unless `network_policy.enabled = false`, two NetworkPolicies admit only the cube's transfer and the " +
			"`ctr_serving` pods whose `cube_conf` names this cube (any namespace, any `stack`: they carry the label `" + stack.CubeClientLabel("<cube>") + " = <cube's namespace>`) " +
			"and those of the same `stack` in the cube's namespace to the cube servers' `port`, and only the cube servers to the " +
			"transfer's `transfer_files_port` (the model's published shards); the transfer's status port (`transfer_port`) stays open, " +
			"since Terraform reads `/status` through the API server. NetworkPolicies take effect only where the cluster's network plugin " +
			"enforces them (e.g. Calico, Cilium, or a cloud's policy-enforcing CNI); elsewhere they are accepted and ignored.\n\n" +
			"**Pods.** " + hardenedDefaults + " This repository's image also runs as user and group 65532 (non-root, with `fsGroup` 65532 so " +
			"that it writes its dictionary and work volumes) on a read-only root filesystem. `security_context` relaxes any of it.",
		Attributes: map[string]schema.Attribute{
			"id":        idAttribute(),
			"name":      nameAttribute("Name prefix of every object."),
			"namespace": namespaceAttribute("Namespace of every object."),
			"stack":     stackAttribute("Name of the stack this cube belongs to"),
			"dict": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultCubeDict),
				MarkdownDescription: "Dictionary name, Paddle Serving's `sparse_param_service_table_name`. Defaults to `" + stack.DefaultCubeDict + "`."},
			"shards": num("Number of shards; key k lives on shard `k % shards`, as Paddle's client routes it. Changing it re-shards: "+
				"new shards' objects are created, removed ones deleted, and the transfer restarts and rebuilds every shard from the last model.",
				stack.DefaultCubeShards, stack.MinCubeShards, stack.MaxCubeShards),
			"replicas": num("Cube servers per shard.", stack.DefaultCubeReplicas, stack.MinCubeReplicas, stack.MaxCubeReplicas),
			"image": schema.StringAttribute{Optional: true, Computed: true,
				MarkdownDescription: "Image with the `cube` binary, for servers and transfer. Defaults to `" + stack.CubeImageRepository + ":<provider version>`, built from this repository by `make images` at the same version (a provider with no version at all has no default: set it).",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()}, Validators: imageValidators},
			"donefile_url": schema.StringAttribute{Required: true,
				MarkdownDescription: "URL of the donefile (`base.txt`) the transfer watches: `ctr_training_job.<name>.donefile_url`."},
			"mode": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultCubeMode),
				MarkdownDescription: "`base`: roll out base versions only; `base_delta`: also the patches in `patch.txt`. Defaults to `base`.",
				Validators:          []validator.String{stringvalidator.OneOf(stack.CubeModes...)}},
			"serve_version": schema.StringAttribute{Optional: true, Validators: []validator.String{serveVersionValidator},
				MarkdownDescription: "Pins the cube to a version it keeps: a rollback that holds. The cube keeps two versions, the one it serves and the one before it " +
					"(`kept_versions`); the transfer keeps both builds and every cube server both dictionaries on its disk, deleting older ones after each switch. " +
					"Setting it restarts the transfer, which rolls the pinned version out as any model (every replica prepared, then one switch instant for all), " +
					"keeps healed replicas on it, and rolls no line of `donefile_url` out while it is set; the apply waits until every replica serves it. " +
					"A version that is not kept is refused at plan when the last refresh read `kept_versions`. Removing it rolls the donefile's newest model out again."},
			"port":          portAttribute(fmt.Sprintf("Port of the cube servers (baidu_std and HTTP). Must differ from %d, where each server answers the kubelet's probes apart from its clients.", stack.CubeProbePort), stack.DefaultCubePort),
			"transfer_port": portAttribute("Port of the transfer's status API (`/status`, `/healthz`, `/metrics`, `POST /trigger`). Must differ from `port`.", stack.DefaultTransferPort),
			"transfer_files_port": portAttribute("Port at which the transfer publishes built shards (`/files/`) for the cube servers to download; "+
				"only cube servers may reach it while the network policies are enabled. Must differ from `port` and `transfer_port`.", stack.DefaultTransferFilesPort),
			"resources": defaultedResourcesAttribute("each cube server", stack.DefaultCubeServerResources,
				"A memory request given alone is also the memory limit. The dictionary is memory-mapped: its page cache counts against the limit "+
					"but is reclaimed under pressure, so a limit below the shard's dictionary size slows lookups (they read from disk) rather than "+
					"killing the pod; to keep a shard in memory, ask for its dictionary size plus about 512Mi."),
			"transfer_resources": defaultedResourcesAttribute("the transfer (it mirrors each version's input to its claim and builds it streaming)",
				stack.DefaultTransferResources, ""),
			"storage": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "Per-replica dictionary storage as a PersistentVolumeClaim. Unset: an emptyDir (a restarted pod gets its dictionary back from the transfer). Changing it replaces the cube.",
				PlanModifiers:       []planmodifier.Object{objectplanmodifier.RequiresReplace()},
				Attributes: map[string]schema.Attribute{
					"size":          schema.StringAttribute{Optional: true, MarkdownDescription: "Claim size. Defaults to `" + stack.DefaultCubeStorageSize + "`."},
					"storage_class": schema.StringAttribute{Optional: true, MarkdownDescription: "StorageClass; the cluster's default StorageClass when unset." + storageGuideLink},
				}},
			"transfer_storage": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultTransferStorage),
				MarkdownDescription: "Size of the transfer's volume (downloads, built shards, state). Defaults to `" + stack.DefaultTransferStorage + "`."},
			"transfer_storage_class": schema.StringAttribute{Optional: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				MarkdownDescription: "StorageClass of the transfer's volume; the cluster's default StorageClass when unset (a cluster without one, " +
					"such as EKS since 1.30, leaves the claim Pending: name a class). Changing it replaces the cube: a claim's class cannot change." + storageGuideLink},
			"node_selector": func() schema.MapAttribute {
				a := nodeSelectorAttribute("every cube pod")
				a.DeprecationMessage, a.MarkdownDescription = deprecatedFor("pod.node_selector"), "Deprecated: use `pod.node_selector`. "+a.MarkdownDescription
				return a
			}(),
			"image_pull_secrets": pullSecretsAttribute("the cube servers and the transfer"),
			"tolerations": func() schema.ListNestedAttribute {
				a := tolerationsAttribute("every cube pod")
				a.DeprecationMessage, a.MarkdownDescription = deprecatedFor("pod.tolerations"), "Deprecated: use `pod.tolerations`. "+a.MarkdownDescription
				return a
			}(),
			"timeout_ms": num("cube.conf `timeout`: Paddle Serving's per-request timeout in milliseconds.",
				stack.DefaultCubeTimeoutMS, stack.MinCubeTimeoutMS, stack.MaxCubeTimeoutMS),
			"retry": num("cube.conf `retry`: Paddle Serving's retries on another replica; `0` turns retries off.", stack.DefaultCubeRetry, 0, stack.MaxCubeRetry),
			"backup_request_ms": num("cube.conf `backup_request`: send a backup request after this many milliseconds; 0 disables it.",
				0, 0, stack.MaxBackupRequestMS),
			"security_context": deprecated(securityContextAttribute("the cube servers' and the transfer's pods", cubeImage), "pod.security_context"),
			"pod":              podAttribute("the cube servers' and the transfer's pods", cubeImage, "Changes roll the cube servers and the transfer."),
			"network_policy": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "Who may reach the cube (see above). Unset: the policies are rendered with no extra peers. " +
					"Turning them off or changing the peers updates the NetworkPolicies in place (turned off, they are deleted).",
				Attributes: map[string]schema.Attribute{
					"enabled": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
						MarkdownDescription: "Render the NetworkPolicies. Defaults to `true`; `false` lets every pod that can route to the cube reach its servers and the model."},
					"allow_from": schema.ListNestedAttribute{Optional: true,
						MarkdownDescription: "Further peers admitted to the cube servers' `port` (not to the model files; Prometheus scrapes the probe port, see `metrics.scrape_from`), " +
							"e.g. a Paddle Serving deployed by other means. " + peerDescription,
						NestedObject: networkPeerObject()},
				}},
			"spread": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "How each shard's replicas spread over the cluster, so that losing one node (or zone) leaves each shard a replica: " +
					"a pod anti-affinity and a topology spread constraint (`maxSkew` 1) over `topology_key` among the replicas of one shard (other shards' pods do not count). " +
					"Unset: spread over nodes (`" + stack.DefaultSpreadTopologyKey + "`) as a preference. A node affinity from `pod` is kept beside them. Changes roll the cube servers.",
				Attributes: map[string]schema.Attribute{
					"topology_key": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultSpreadTopologyKey),
						MarkdownDescription: "Node label whose values are the domains the replicas spread over, e.g. `topology.kubernetes.io/zone`. Defaults to `" + stack.DefaultSpreadTopologyKey + "`.",
						Validators:          []validator.String{stringvalidator.LengthAtLeast(1)}},
					"required": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
						MarkdownDescription: "`false` (the default): a preference (`preferredDuringScheduling` anti-affinity, `whenUnsatisfiable: ScheduleAnyway`) that the scheduler gives up " +
							"when the cluster has fewer domains than `replicas`. `true`: a rule (`requiredDuringScheduling`, `DoNotSchedule`): a replica that finds no domain " +
							"without another replica of its shard stays Pending."},
				}},
			"disruption_budget": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: fmt.Sprintf("Render a PodDisruptionBudget per shard (`<name>-shard-<i>`, `maxUnavailable: %d`, `unhealthyPodEvictionPolicy: AlwaysAllow`), "+
					"so that a node drain or a cluster-autoscaler scale-down evicts one replica of a shard at a time and waits until its replacement is Ready (serves a version). "+
					"Rendered only with `replicas` of 2 or more: one replica can only be kept by refusing every eviction, which would block node drains for good. "+
					"Defaults to `true`; set `false` to write your own budget (the eviction API refuses to evict a pod that two budgets select).", stack.ShardMaxUnavailable)},
			"metrics": metricsAttribute(),
			"control_token": schema.StringAttribute{Optional: true, Computed: true, Sensitive: true,
				MarkdownDescription: "Shared token of the control endpoints (agent, transfer, ControlService), stored in a Secret. Generated when unset. " +
					"Changing it rotates the token without restarting a pod: the cube servers and the transfer read the Secret's file again when the kubelet updates it (each pod within a minute or two), " +
					"and still accept (the transfer still offers) the replaced token for " + strconv.Itoa(int(api.ControlTokenGrace/time.Minute)) + " minutes, so no rollout fails on the way.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"kubernetes": connectionResourceAttribute(),
			"timeouts":   cubeTimeouts.attribute(ctx),
			"manifests":  manifestsAttribute(),
			"adopt":      adoptAttribute(),
			"cube_conf": schema.StringAttribute{Computed: true,
				MarkdownDescription: "Paddle Serving's `cube.conf` (JSON) for this cube: one `http://<shard service>:<port>` per shard, which brpc re-resolves to the shard's ready replicas."},
			"endpoints":    schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "Address of each shard's Service, shard by shard."},
			"transfer_url": schema.StringAttribute{Computed: true, MarkdownDescription: "In-cluster URL of the transfer's status API (`transfer_port`)."},
			"served_version": schema.StringAttribute{Computed: true,
				MarkdownDescription: "Model version the replicas report serving, read through the transfer at refresh: the version at least one replica of every shard serves. Empty until the first model, while a shard has no replica serving, or when the transfer cannot be reached."},
			"kept_versions": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The versions `serve_version` may name, as the transfer reports them at refresh: the decided version, then the one before it (null when the transfer cannot be reached)."},
			"serving_replicas": schema.ListAttribute{Computed: true, ElementType: types.Int64Type,
				MarkdownDescription: "Per shard, how many replicas serve `served_version`, as they report it at refresh (null when the transfer cannot be reached). When a shard has fewer than `replicas`, the plan shows a warning naming the replicas and what they serve; the transfer heals them by itself."},
		},
	}
}

// peerDescription says what a NetworkPolicy peer of networkPeerObject admits.
const peerDescription = "Each peer is a NetworkPolicy peer: the pods with `pod_labels` in the cube's namespace, " +
	"the pods with `pod_labels` in the namespaces with `namespace_labels`, or every pod of the namespaces with `namespace_labels`."

// networkPeerObject is a NetworkPolicy peer (stack.NetworkPeer).
func networkPeerObject() schema.NestedAttributeObject {
	return schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
		"namespace_labels": schema.MapAttribute{Optional: true, ElementType: types.StringType,
			MarkdownDescription: "Labels of the peers' namespaces, e.g. `{ \"kubernetes.io/metadata.name\" = \"monitoring\" }`."},
		"pod_labels": schema.MapAttribute{Optional: true, ElementType: types.StringType,
			MarkdownDescription: "Labels of the peer pods, e.g. `{ \"app.kubernetes.io/name\" = \"prometheus\" }`."},
	}}
}

// metricsAttribute is ctr_cube's metrics (stack.Metrics).
func metricsAttribute() schema.SingleNestedAttribute {
	scrapers := make([]string, 0, len(stack.DefaultScrapers))
	for _, k := range slices.Sorted(maps.Keys(stack.DefaultScrapers)) {
		scrapers = append(scrapers, fmt.Sprintf("`%s = %s`", k, stack.DefaultScrapers[k]))
	}
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: fmt.Sprintf("How Prometheus scrapes the cube. Each cube server serves its metrics at `%[1]s` on its probe port %[2]d "+
			"(apart from its clients' connections), the transfer at `%[1]s` on `transfer_port`. Unset: the scrape annotations, no PodMonitor, and the "+
			"default scrapers admitted to the probe port. The provider's repository ships a Grafana dashboard of these metrics (`examples/grafana/ctr-cube.json`). "+
			"Changing `annotations` rolls the cube servers and the transfer; the other settings change no pod.", api.MetricsPath, stack.CubeProbePort),
		Attributes: map[string]schema.Attribute{
			"annotations": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(stack.DefaultMetricsAnnotations),
				MarkdownDescription: fmt.Sprintf("Render the conventional `%s`, `%s` and `%s` annotations on the cube servers' and the transfer's pods, "+
					"which Prometheus' annotation-driven pod discovery reads. A key that `pod.annotations` sets keeps that value. Defaults to `%t`.",
					stack.ScrapeAnnotation, stack.ScrapePortAnnotation, stack.ScrapePathAnnotation, stack.DefaultMetricsAnnotations)},
			"pod_monitor": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "Render a `monitoring.coreos.com/v1` PodMonitor `<name>` for the Prometheus Operator: the cube servers' probe port and the transfer's " +
					"`transfer_port`, with the pod labels `" + strings.Join(stack.PodMonitorTargetLabels, "`, `") + "` on every series. The cluster must serve " +
					"the Prometheus Operator's PodMonitor CRD: without it, the apply fails before it writes anything, naming the CRD. Defaults to `false`."},
			"pod_monitor_labels": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Further labels of the PodMonitor: those a Prometheus' `podMonitorSelector` selects, e.g. `{ release = \"kube-prometheus-stack\" }`. Needs `pod_monitor = true`."},
			"scrape_from": schema.ListNestedAttribute{Optional: true,
				MarkdownDescription: "The pods the cube servers' NetworkPolicy admits to their probe port, where their metrics are (the transfer's status port is open to all). " +
					"Unset: the pods labelled " + strings.Join(scrapers, ", ") + " in any namespace (the Prometheus Operator labels the Prometheus pods it runs so). " +
					"`[]` admits no pod. Has no effect, and is refused, with `network_policy.enabled = false`. " + peerDescription,
				NestedObject: networkPeerObject()},
		}}
}
