package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube/health"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// What the training pods' images add to the hardened defaults, for the docs.
const (
	trainingImage = "Paddle's training images run as root and write inside their own filesystem, so neither a non-root user nor a read-only " +
		"root filesystem is forced on them; their pods get `fsGroup` 65532, the file server's group, so that trainers (root, " +
		"but without capabilities) and the file server both write the model output. If an image needs a capability back (e.g. " +
		"`tar` restoring file owners needs `CHOWN`), add it with `add_capabilities`."
	fileServerImage = "The file server (this repository's image) also runs as user and group 65532 with `runAsNonRoot`, `fsGroup` 65532 " +
		"and a read-only root filesystem."
)

// replaceReason is shown in docs; the plan adds a warning with the same reason.
const replaceReason = "Changing it replaces the Volcano job (training restarts): Volcano cannot change the tasks of a submitted job."

func replaceStr() []planmodifier.String {
	return []planmodifier.String{stringplanmodifier.RequiresReplace()}
}

// replaceStrUnlessDefault replaces on a change, except the one from no value (its block was
// absent) to the default: adding `model_output = { ... }` to a job must not restart training
// for an attribute whose value stays what it was.
func replaceStrUnlessDefault(def string) []planmodifier.String {
	return []planmodifier.String{stringplanmodifier.RequiresReplaceIf(func(_ context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
		resp.RequiresReplace = !(req.StateValue.IsNull() && req.PlanValue.ValueString() == def)
	}, "Changing it replaces the job; setting it to its default does not.", "Changing it replaces the job; setting it to its default does not.")}
}

func replaceInt() []planmodifier.Int64 {
	return []planmodifier.Int64{int64planmodifier.RequiresReplace()}
}

func policyAttribute(desc string) schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		Optional:            true,
		MarkdownDescription: desc + " " + replaceReason,
		PlanModifiers:       []planmodifier.List{listplanmodifier.RequiresReplace()},
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"event": schema.StringAttribute{Required: true, MarkdownDescription: "Volcano event: one of " + quoted(stack.Events) + ".",
				Validators: []validator.String{stringvalidator.OneOf(stack.Events...)}},
			"action": schema.StringAttribute{Required: true, MarkdownDescription: "Volcano action: one of " + quoted(stack.Actions) + ".",
				Validators: []validator.String{stringvalidator.OneOf(stack.Actions...)}},
		}},
	}
}

func taskAttribute(name, desc string) schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional:            true,
		MarkdownDescription: fmt.Sprintf("%s Defaults to %d replicas. %s", desc, stack.DefaultReplicas, replaceReason),
		PlanModifiers:       []planmodifier.Object{objectplanmodifier.RequiresReplace()},
		Attributes: map[string]schema.Attribute{
			"replicas": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(stack.DefaultReplicas),
				MarkdownDescription: fmt.Sprintf("Number of %s pods. At least %d. Defaults to `%d`.", name, stack.MinTaskReplicas, stack.DefaultReplicas),
				Validators:          []validator.Int64{int64validator.AtLeast(stack.MinTaskReplicas)}},
			"requests": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Resource requests per pod (Kubernetes quantities), e.g. `{ cpu = \"1\", memory = \"4Gi\" }`. Defaults to " +
					resourcesDoc(stack.DefaultTaskResources.Requests) + ". " + resourcesRule},
			"limits": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Resource limits per pod, e.g. `{ cpu = \"10\", memory = \"30Gi\" }`. Defaults to " + resourcesDoc(stack.DefaultTaskResources.Limits) +
					". A request given above the limit given is refused. `CPU_NUM` is the whole CPUs of the CPU limit (at least 1)."},
			"gpus": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64validator.AtLeast(0)},
				MarkdownDescription: "GPUs per pod (`nvidia.com/gpu` limit), for trainers and collective workers; refused on parameter servers, which keep and update the tables on CPUs. " +
					"A collective worker runs one process per GPU (`TRAINER_PORTS_NUM`). Defaults to none."},
			"policies": schema.ListNestedAttribute{Optional: true,
				MarkdownDescription: "Task lifecycle policies. Defaults to `TaskCompleted` -> `CompleteJob` for trainers and workers (the job completes when they finish), none for parameter servers.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"event":  schema.StringAttribute{Required: true, Validators: []validator.String{stringvalidator.OneOf(stack.Events...)}, MarkdownDescription: "Volcano event: one of " + quoted(stack.Events) + "."},
					"action": schema.StringAttribute{Required: true, Validators: []validator.String{stringvalidator.OneOf(stack.Actions...)}, MarkdownDescription: "Volcano action: one of " + quoted(stack.Actions) + "."},
				}}},
		},
	}
}

func trainingJobSchema(ctx context.Context) schema.Schema {
	return schema.Schema{
		MarkdownDescription: "PaddlePaddle distributed training on Volcano, as ElasticCTR runs it: parameter servers and trainers " +
			"(or collective GPU workers) gang-scheduled as one Volcano Job, a model-output volume, and a file server that " +
			"publishes the model output over HTTP with directory listings for the cube transfer. Apply waits until the job runs (see `wait`).\n\n" +
			"**Pods.** " + hardenedDefaults + " The file server, this repository's image, also runs as user 65532 on a read-only root " +
			"filesystem; Paddle's training images run as root (see `security_context`). `security_context` and " +
			"`file_server.security_context` relax these defaults.",
		Attributes: map[string]schema.Attribute{
			"id":        idAttribute(),
			"name":      nameAttribute("Name of the Volcano job; prefix of every object it owns."),
			"namespace": namespaceAttribute("Namespace of every object. It must exist."),
			"stack":     stackAttribute("Name of the stack this job belongs to"),
			"mode": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.ModePS), PlanModifiers: replaceStr(),
				MarkdownDescription: "`ps`: parameter servers (`pserver`) and `trainer`s, the ElasticCTR layout; `collective`: GPU `worker`s with Volcano's `svc` and `env` plugins, each given what Paddle's collective launchers read to form one group across pods " +
					"(`PADDLE_TRAINER_ENDPOINTS`, `PADDLE_TRAINERS`, `PADDLE_TRAINER_ID`, `TRAINER_PORTS_NUM` for `paddle.distributed.fleet.launch`; `PADDLE_MASTER`, " +
					"`PADDLE_NNODES`, `PADDLE_RANK` for `paddle.distributed.launch`), from the workers' names `<name>-worker-<i>.<name>` (and `POD_IP` set to the " +
					"worker's own name, as the legacy launcher finds its rank among the endpoints), with a memory-backed `/dev/shm` for NCCL. Defaults to `ps`.",
				Validators: []validator.String{stringvalidator.OneOf(stack.Modes...)}},
			// Replaces the job only where the tasks render differently (ModifyPlan).
			"recipe": schema.StringAttribute{Optional: true,
				MarkdownDescription: "The training image the job runs, one of " + quoted(stack.RecipeNames()) + ": it sets the default `image` and `entry` " +
					"and what else that image's scripts read (the training contract in the docs says what each needs and writes). " +
					"Unset, the default image runs EDL's recipe (`" + stack.RecipeEDL + "`), and an image of your own runs its own `entry`. " +
					"A change replaces the job where it changes the training pods (naming the recipe a job already runs does not).",
				Validators: []validator.String{stringvalidator.OneOf(stack.RecipeNames()...)}},
			// No schema default: the default moves with the provider's image_registry (planned in ModifyPlan).
			"image": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: replaceStr(),
				MarkdownDescription: "Training image for every task. Defaults to the recipe's (" + recipeImages() + "; EDL's is the seed image with `paddle_k8s`), " +
					"from the provider's `image_registry` when set. " + replaceReason,
				Validators: imageValidators},
			"image_pull_policy": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultPullPolicy), PlanModifiers: replaceStr(),
				MarkdownDescription: "One of " + quoted(stack.PullPolicies) + ". Defaults to `" + stack.DefaultPullPolicy + "`.",
				Validators:          []validator.String{stringvalidator.OneOf(stack.PullPolicies...)}},
			"image_pull_secrets": func() schema.ListAttribute {
				a := pullSecretsAttribute("the training tasks and the file server", listplanmodifier.RequiresReplace())
				a.MarkdownDescription += " " + replaceReason
				return a
			}(),
			"command": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				PlanModifiers:       []planmodifier.List{listplanmodifier.RequiresReplace()},
				MarkdownDescription: "Container command. Defaults to `[\"paddle_k8s\", \"start_fluid\"]`, the launcher that finds the other pods by label and runs `entry` in the right role. " + replaceReason,
				Validators:          []validator.List{listvalidator.SizeAtLeast(1), listvalidator.ValueStringsAre(stringvalidator.LengthAtLeast(1))}},
			"entry": schema.StringAttribute{Optional: true, PlanModifiers: replaceStr(),
				MarkdownDescription: "The training program the launcher runs (`ENTRY`, through `sh -c`). With the default command it defaults to the recipe's: with the default image, `" + stack.DefaultEntry + "`, " +
					"EDL's CTR example; with an image of your own and no `recipe` it is required, since an empty `ENTRY` exits 0 and the job completes without training. " +
					"Every task also gets `CPU_NUM`, the task's whole CPUs (its `cpu` limit, else its request, at least 1), so Fluid runs one program copy per CPU of the pod rather than of the node; `pod.env` overrides it."},
			"env": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				PlanModifiers:       []planmodifier.Map{mapplanmodifier.RequiresReplace()},
				DeprecationMessage:  deprecatedFor("pod.env"),
				MarkdownDescription: "Deprecated: use `pod.env`. Extra environment variables for every task; they override the `PADDLE_*` variables the provider sets. " + replaceReason},
			"port": portAttribute("`PADDLE_PORT`, the parameter-server port.", stack.DefaultPort, replaceInt()...),
			"queue": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultQueue), PlanModifiers: replaceStr(),
				MarkdownDescription: "Volcano queue. Defaults to `" + stack.DefaultQueue + "`."},
			"scheduler_name": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultScheduler), PlanModifiers: replaceStr(),
				MarkdownDescription: "Scheduler of the pods. Defaults to `" + stack.DefaultScheduler + "`; gang scheduling needs it."},
			"min_available": schema.Int64Attribute{Optional: true, Computed: true,
				MarkdownDescription: "Gang size: the job starts only when this many pods can run at once. Defaults to every pod of the job " +
					"(pservers + trainers, or workers), so training never starts half-placed. Changes in place. A gang larger than the job is refused; " +
					"a gang larger than the cluster stays Pending and blocks its queue.",
				Validators: []validator.Int64{int64validator.AtLeast(1)}},
			"max_retry": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(stack.DefaultMaxRetry), PlanModifiers: replaceInt(),
				MarkdownDescription: fmt.Sprintf("How many times Volcano restarts the job before it fails. At least %d. Defaults to `%d`.", stack.MinMaxRetry, stack.DefaultMaxRetry),
				Validators:          []validator.Int64{int64validator.AtLeast(stack.MinMaxRetry)}},
			"ttl_seconds_after_finished": schema.Int64Attribute{Optional: true, PlanModifiers: replaceInt(),
				Validators: []validator.Int64{int64validator.AtLeast(0)},
				MarkdownDescription: "Have Volcano delete the Volcano Job, with its pods and pod group, this many seconds after it finished " +
					"(`Completed`, `Failed` or `Terminated`; `0`: at once), freeing what its finished pods hold. The file server, the model output " +
					"and the job's other objects stay. With it set, a refresh that finds the Volcano Job gone takes it as deleted by Volcano: " +
					"`phase` reads `" + phaseCollected + "`, the plan shows no change and the job is not submitted again (to train again, replace " +
					"the resource: `terraform apply -replace`). Unset (the default): Volcano keeps the job, and a job deleted behind Terraform's back " +
					"is submitted again by the next apply. " + replaceReason},
			"pserver":  taskAttribute("parameter server", "Parameter-server task (`mode = \"ps\"`). Pods are labelled `paddle-job-pserver=<name>`."),
			"trainer":  taskAttribute("trainer", "Trainer task (`mode = \"ps\"`). Pods are labelled `paddle-job=<name>` and mount the model output."),
			"worker":   taskAttribute("worker", "Collective worker task (`mode = \"collective\"`), typically with `gpus`."),
			"policies": policyAttribute("Job lifecycle policies. Defaults to `PodEvicted` and `PodFailed` -> `RestartJob`."),
			"dataset": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "Where the trainers read samples: ElasticCTR's `data.config`. The source is HDFS (`hdfs_address`, `hdfs_ugi`: " +
					"`HDFS_ADDRESS`, `HDFS_UGI` from a Secret, `DATASET_PATH`, as ElasticCTR's images read them), an S3-compatible bucket (`s3`) or a " +
					"volume (`volume`); at most one. Every source also gets `START_DATE_HR`, `END_DATE_HR` and `SPARSE_DIM`. " +
					"ElasticCTR's own images read HDFS only; a trainer image that reads `s3` or `volume` datasets follows `DATASET_SOURCE` " +
					"(see the training contract below).",
				Attributes: map[string]schema.Attribute{
					"s3": schema.SingleNestedAttribute{Optional: true, PlanModifiers: []planmodifier.Object{objectplanmodifier.RequiresReplace()},
						MarkdownDescription: "An S3-compatible bucket: AWS S3, or Baidu Cloud BOS through its S3 endpoint. Trainers get `DATASET_SOURCE=" + stack.DatasetS3 + "`, " +
							"`DATASET_URL=s3://<bucket><path>`, `S3_BUCKET`, `DATASET_PATH`, and the variables AWS's SDKs and CLI read: `AWS_ENDPOINT_URL`, `AWS_REGION`, " +
							"and `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` by reference to `credentials_secret`. No credential passes through Terraform.",
						Attributes: map[string]schema.Attribute{
							"bucket": schema.StringAttribute{Required: true, MarkdownDescription: "Bucket name.",
								Validators: []validator.String{stringvalidator.RegexMatches(stack.S3BucketPattern, stack.S3BucketRule)}},
							"endpoint": schema.StringAttribute{Optional: true,
								MarkdownDescription: "Endpoint, `https://HOST[:PORT]`: e.g. `https://s3.bj.bcebos.com` for BOS in Beijing. Unset: the SDK's default (AWS)."},
							"region": schema.StringAttribute{Optional: true, MarkdownDescription: "Region, e.g. `us-east-1` or `bj`.",
								Validators: []validator.String{stringvalidator.RegexMatches(stack.S3RegionPattern, stack.S3RegionRule)}},
							"credentials_secret": schema.StringAttribute{Optional: true,
								MarkdownDescription: "A Secret in the job's namespace with the keys `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (for BOS: its access key id and secret). " +
									"Unset when the pods have their own identity (IRSA on EKS, Workload Identity on GKE, through `pod.service_account_annotations`)."},
						}},
					"volume": schema.SingleNestedAttribute{Optional: true, PlanModifiers: []planmodifier.Object{objectplanmodifier.RequiresReplace()},
						MarkdownDescription: "An existing PersistentVolumeClaim with the samples (an NFS share, a CSI bucket mount, a cloud file system), mounted read-only " +
							"into the trainers. Trainers get `DATASET_SOURCE=" + stack.DatasetVolume + "` and `DATASET_PATH=<mount_path><path>`.",
						Attributes: map[string]schema.Attribute{
							"claim_name": schema.StringAttribute{Required: true, MarkdownDescription: "Name of the claim, in the job's namespace."},
							"mount_path": schema.StringAttribute{Optional: true,
								MarkdownDescription: "Where the trainers see it. Defaults to `" + stack.DefaultDatasetMountPath + "`; must not hold or be inside the model output or `" + stack.SlotConfigDir + "`."},
						}},
					"hdfs_address": schema.StringAttribute{Optional: true, PlanModifiers: replaceStr(), MarkdownDescription: "HDFS name node, `hdfs://HOST:PORT`."},
					"hdfs_ugi": schema.StringAttribute{Optional: true, Sensitive: true,
						MarkdownDescription: "HDFS user and password, `user,password`. Stored in a Secret and never shown in `manifests`; changes in place."},
					"path":       schema.StringAttribute{Optional: true, PlanModifiers: replaceStr(), MarkdownDescription: "Absolute path of the samples in the source (on HDFS, under the bucket, under the volume's `mount_path`), e.g. `/train_data`."},
					"start_hour": schema.StringAttribute{Optional: true, PlanModifiers: replaceStr(), MarkdownDescription: "First hour of data, `YYYYMMDD/HH` (an hour that exists, `00`-`23`)."},
					"end_hour":   schema.StringAttribute{Optional: true, PlanModifiers: replaceStr(), MarkdownDescription: "Last hour of data, `YYYYMMDD/HH`; not before `start_hour`."},
					"sparse_dim": schema.Int64Attribute{Optional: true, PlanModifiers: replaceInt(), Validators: []validator.Int64{int64validator.AtLeast(1)},
						MarkdownDescription: "Number of sparse feature ids (the embedding table's rows), e.g. `1000001`."},
				}},
			"slot_config": schema.StringAttribute{Optional: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIf(func(_ context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
					// Adding or removing it changes the pods' volumes; editing it only the ConfigMap.
					resp.RequiresReplace = req.StateValue.IsNull() != req.PlanValue.IsNull()
				}, "Adding or removing it replaces the job; editing it updates the ConfigMap in place.", "Adding or removing it replaces the job; editing it updates the ConfigMap in place.")},
				MarkdownDescription: "Content of `slot.conf` (one slot id per line), mounted at `" + stack.SlotConfigPath + "` with `SLOT_CONF` pointing at it, " +
					"and served by the file server at `/slot.conf`, where ElasticCTR's scripts fetch it. " +
					"Editing it updates the ConfigMap in place and rolls the file server's pod (training pods keep the content they read); adding or removing it replaces the job."},
			"model_output": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "The volume the trainers write the model and the cube input to, which the file server publishes. A `ReadWriteOnce` " +
					"volume (the default, works on any cluster) mounts on one node only, so trainers are placed beside the file server with pod " +
					"affinity; a `ReadWriteMany` volume (e.g. CFS on CCE) lets them spread.",
				Attributes: map[string]schema.Attribute{
					"size": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultModelSize),
						MarkdownDescription: "Requested size, a Kubernetes quantity. Defaults to `" + stack.DefaultModelSize + "`. Growing it needs a StorageClass that allows expansion."},
					"storage_class": schema.StringAttribute{Optional: true, PlanModifiers: replaceStr(),
						MarkdownDescription: "StorageClass of the claim. Defaults to the cluster's default StorageClass." + storageGuideLink},
					"access_mode": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.AccessReadWriteOnce), PlanModifiers: replaceStrUnlessDefault(stack.AccessReadWriteOnce),
						MarkdownDescription: "One of " + quoted(stack.AccessModes) + ". Defaults to `" + stack.AccessReadWriteOnce + "`.",
						Validators:          []validator.String{stringvalidator.OneOf(stack.AccessModes...)}},
					"existing_claim": schema.StringAttribute{Optional: true, PlanModifiers: replaceStr(),
						MarkdownDescription: "Use this existing PersistentVolumeClaim instead of creating one; it is kept when the job is replaced or destroyed."},
					"mount_path": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultModelMountPath), PlanModifiers: replaceStrUnlessDefault(stack.DefaultModelMountPath),
						MarkdownDescription: "Where trainers mount the volume (`MODEL_OUTPUT_DIR`); the file server serves it under the same URL path. Defaults to `" + stack.DefaultModelMountPath + "`."},
					"donefile_path": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultDonefilePath),
						MarkdownDescription: "Path of the donefile (`base.txt`) inside the volume. Defaults to `" + stack.DefaultDonefilePath + "`, where Paddle's dumper writes it."},
					"retain": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
						MarkdownDescription: "Keep the claim ctr creates when the job is destroyed or replaced, so that a retraining (a replaced job) finds every model " +
							"version the cube and serving may still read, and a serving pod that restarts finds its model. Defaults to `true`: destroy then leaves " +
							"the claim (annotated `" + stack.RetainAnnotation + "`, with its owner label, so a job of the same name takes it back) and warns. " +
							"To delete the model output, set `false` and apply before destroying, or delete the claim yourself. Changes in place."},
				}},
			"model_export": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "The model-output step, with no Paddle and no dumper of your own: a one-pod Deployment `<name>-model-export` of this " +
					"repository's image (the file server's) runs `cube export --watch` on the model volume, beside the file server. Each time the trainers " +
					"finish a save (a sub-folder of `path`, e.g. EDL's `models/pass-<p>`), once its files are unchanged for `interval_seconds`, it reads the " +
					"embedding (`var`) as Paddle saved it and publishes it as a new cube version: SequenceFiles under `<folder>/data/<id>/` and a line in " +
					"the donefile the cube follows (`model_output.donefile_path`, which must end with `donefile/base.txt`), all or nothing. A broken or " +
					"incomplete save publishes nothing and is retried when it changes. With the default image and `entry`, trainers save into " +
					"`<mount_path>/" + stack.DefaultModelExportPath + "`, so `model_export = {}` is the whole recipe. Changes in place.",
				Attributes: map[string]schema.Attribute{
					"format": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultModelExportFormat),
						MarkdownDescription: "What a save holds: `lodtensor` (one file per variable, Fluid's `save_persistables`; key = row index, as EDL's and ElasticCTR's dumpers key it), " +
							"`combined` (`__params__` or `*.pdiparams` with its program; key = row index), `selectedrows` (a distributed lookup table's rows; key = feasign id) or " +
							"`ps-table` (Paddle 2.x parameter-server text shards; key = feasign). Defaults to `" + stack.DefaultModelExportFormat + "`.",
						Validators: []validator.String{stringvalidator.OneOf(stack.ModelExportFormats...)}},
					"path": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(stack.DefaultModelExportPath),
						MarkdownDescription: "The folder the trainers save into, relative to `model_output.mount_path`; each sub-folder is one save. Defaults to `" + stack.DefaultModelExportPath + "`."},
					"var": schema.StringAttribute{Optional: true,
						MarkdownDescription: "The embedding variable: its file in a save (defaults to `" + stack.DefaultModelExportVar + "`, EDL's and ElasticCTR's table), " +
							"or for `ps-table` the table's sub-folder of a save (e.g. `embedding_txt` or `000`; none: the save itself)."},
					"embedx_dim": schema.Int64Attribute{Optional: true,
						MarkdownDescription: "`ps-table` with Paddle 2.3+ `part-*` shards only: the accessor's `embedx_dim`; a key's value is then `embed_w` and its `embedx_w` floats."},
					"interval_seconds": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(stack.DefaultModelExportInterval),
						MarkdownDescription: fmt.Sprintf("How often to look for a new save; a save is published once unchanged over one interval. Defaults to `%d`.", stack.DefaultModelExportInterval),
						Validators:          []validator.Int64{int64validator.AtLeast(1)}},
					"serving_model": schema.StringAttribute{Optional: true,
						MarkdownDescription: "A folder of each save, relative to it, holding the serving model (the dense network Paddle Serving loads): published with " +
							"the version as `<folder>/serving/<id>/`, beside the cube's input `<folder>/data/<id>/` and before the donefile line, so that the dense model " +
							"and the sparse table of a version carry the same id. None by default."},
					"resources": defaultedResourcesAttribute("the model export's pod (it streams a save's rows: its memory does not grow with the table)",
						stack.DefaultModelExportResources, ""),
				}},
			"file_server": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "The HTTP file server that publishes the model output with directory listings (what the cube transfer expects). Changes in place.",
				Attributes: map[string]schema.Attribute{
					"image": schema.StringAttribute{Optional: true, Validators: imageValidators,
						MarkdownDescription: "Image run as `fileserver --root DIR --listen HOST:PORT [--upload]`. Defaults to `" + stack.CubeImageRepository + ":<provider version>`, built from this repository (`cube fileserver`; a provider with no version at all has no default: set it)."},
					"upload": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
						MarkdownDescription: "Accept uploads (HTTP PUT) into the model output, as ElasticCTR's client uploads `slot.conf`. Defaults to `false` " +
							"(read-only, the volume mounted read-only). Uploads must carry `Authorization: Bearer <upload_token>`: the token is " +
							"generated into the Secret `<name>-upload`, mounted into the file server (`--upload-token-file`) and given to trainers as " +
							"`" + stack.UploadTokenEnv + "` by secret reference. Turning uploads with a token on or off replaces the job " +
							"(the trainers' environment changes)."},
					"upload_insecure": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
						MarkdownDescription: "With `upload = true`, accept uploads from anyone, without a token (`--upload-insecure`): whoever reaches " +
							"the file server may then overwrite the model the cube serves. For trusted networks only: refused unless `service_type` is `ClusterIP`. Defaults to `false`."},
					"port":                portAttribute("HTTP port of the pod and the Service.", stack.DefaultFileServerPort),
					"service_type":        serviceTypeAttribute(),
					"service_annotations": serviceAnnotationsAttribute("the file server's Service"),
					"replicas": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(stack.DefaultFileServerReplicas),
						MarkdownDescription: fmt.Sprintf("File server replicas. Defaults to `%d`.", stack.DefaultFileServerReplicas),
						Validators:          []validator.Int64{int64validator.AtLeast(1)}},
					"security_context": deprecated(securityContextAttribute("the file server's pods", fileServerImage), "file_server.pod.security_context"),
					"pod":              podAttribute("the file server's pods", fileServerImage, "Changes in place."),
					"resources":        defaultedResourcesAttribute("each file server pod", stack.DefaultFileServerResources, ""),
				}},
			"security_context": func() schema.SingleNestedAttribute {
				a := securityContextAttribute("the training pods (pserver, trainer, worker)", trainingImage+" "+replaceReason)
				a.PlanModifiers = []planmodifier.Object{objectplanmodifier.RequiresReplace()}
				return deprecated(a, "pod.security_context")
			}(),
			"pod": podAttribute("the training pods (pserver, trainer, worker; the file server has its own `file_server.pod`)", trainingImage,
				"Its `priority_class_name` also goes on the Volcano Job, by whose class Volcano orders and preempts whole jobs. "+replaceReason,
				objectplanmodifier.RequiresReplace()),
			"upload_token": schema.StringAttribute{Computed: true, Sensitive: true,
				MarkdownDescription: "Bearer token of file server uploads (`file_server.upload = true` without `upload_insecure`), stored in the Secret `<name>-upload`: " +
					"generated when uploads with a token are turned on, then kept. Null when uploads are off or open. Clients outside the cluster " +
					"send it as `Authorization: Bearer <token>`.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"wait": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(waitRunning),
				MarkdownDescription: "How far apply waits for the job, within `timeouts`: `" + waitNone + "` (not at all), `" + waitSubmitted +
					"` (the file server is available and Volcano has taken the job), `" + waitRunning + "` (also: the job runs, with " +
					"`min_available` pods running and ready) or `" + waitCompleted + "` (also: the job has completed; raise `timeouts.create` " +
					"to the training's length). Defaults to `" + waitRunning + "`.\n\n" +
					"While it waits, apply logs the job's state with what its pod group and pods report (the scheduler's reason when the gang " +
					"cannot be placed, `ImagePullBackOff`, `CrashLoopBackOff`, `OOMKilled`), and it fails at once on what waiting cannot fix: " +
					"the job `Failed` or `Aborted`, an image that does not exist or may not be pulled, a container in `CrashLoopBackOff` " +
					"after " + fmt.Sprint(health.CrashLoopLimit) + " restarts, a container killed for running out of memory. Such a failure on " +
					"create leaves the job tainted, so the next apply replaces it. A wait that runs out of time on a submitted job is a " +
					"warning instead: the job stays in state as it is and keeps running, and the next apply does not replace it. " +
					"Changing `wait` (or `timeouts`) alone changes nothing in the cluster and waits for nothing.",
				Validators: []validator.String{stringvalidator.OneOf(waitModes...)}},
			"kubernetes": connectionResourceAttribute(),
			"timeouts":   trainingJobTimeouts.attribute(ctx),
			"manifests":  manifestsAttribute(),
			"adopt":      adoptAttribute(),
			"phase": schema.StringAttribute{Computed: true,
				MarkdownDescription: "Phase of the Volcano job when last read: `Pending`, `Running`, `Completing`, `Completed`, `Restarting`, `Failed`, … or `Missing`; " +
					"`" + phaseCollected + "` when Volcano has deleted it after it finished (`ttl_seconds_after_finished`)."},
			"tasks": schema.MapNestedAttribute{Computed: true,
				MarkdownDescription: "Pods of each task of the job (`pserver` and `trainer`, or `worker`) by phase, counted from the pods " +
					"(label `volcano.sh/task-spec`) when last read. Pods being deleted are not counted; a task without pods counts zeros.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"running":   schema.Int64Attribute{Computed: true, MarkdownDescription: "Pods running, ready or not (a container in `CrashLoopBackOff` is in a running pod)."},
					"pending":   schema.Int64Attribute{Computed: true, MarkdownDescription: "Pods waiting to be placed or to start (pulling images); also pods whose node stopped reporting."},
					"succeeded": schema.Int64Attribute{Computed: true, MarkdownDescription: "Pods that finished successfully."},
					"failed":    schema.Int64Attribute{Computed: true, MarkdownDescription: "Pods that failed."},
				}}},
			"last_condition": schema.SingleNestedAttribute{Computed: true,
				MarkdownDescription: "The latest condition reported for the job when last read: the scheduler's on the job's pod group " +
					"(`Scheduled`, or `Unschedulable` with its reason and message when the gang cannot be placed), or, when later, Volcano's " +
					"change of the job's phase (`type` is the phase, with Volcano's reason and message, e.g. why it `Failed`). Null until there is one.",
				Attributes: map[string]schema.Attribute{
					"type":    schema.StringAttribute{Computed: true, MarkdownDescription: "`Scheduled`, `Unschedulable`, or a job phase."},
					"reason":  schema.StringAttribute{Computed: true, MarkdownDescription: "A reason in one word, e.g. `NotEnoughResources`; may be empty."},
					"message": schema.StringAttribute{Computed: true, MarkdownDescription: "What the scheduler or Volcano said; may be empty."},
					"time":    schema.StringAttribute{Computed: true, MarkdownDescription: "When it was reported (RFC 3339)."},
				}},
			"file_server_url": schema.StringAttribute{Computed: true, MarkdownDescription: "In-cluster URL of the file server, `http://<name>-fileserver.<namespace>.svc:<port>`."},
			"file_server_external_url": schema.StringAttribute{Computed: true,
				MarkdownDescription: "URL of the file server outside the cluster with `file_server.service_type = \"LoadBalancer\"`: `http://HOST:PORT`, " +
					"the load balancer's IP (or hostname, as AWS gives) from the Service's `status.loadBalancer.ingress[0]` and `file_server.port`. " +
					loadBalancerWaitDoc},
			"donefile_url": schema.StringAttribute{Computed: true,
				MarkdownDescription: "In-cluster URL of the donefile (`base.txt`) that the cube transfer watches; `patch.txt` sits beside it."},
		},
	}
}

// recipeImages lists each recipe's default image, for the docs.
func recipeImages() string {
	var parts []string
	for _, r := range stack.Recipes {
		if r.Image == "" {
			parts = append(parts, "none for `"+r.Name+"` (set it)")
			continue
		}
		parts = append(parts, "`"+r.Image+"` for `"+r.Name+"`")
	}
	return strings.Join(parts, ", ")
}
