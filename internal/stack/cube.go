package stack

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/internal/version"
)

// CubeType is the Terraform resource type of the sparse-parameter service.
const CubeType = "ctr_cube"

// CubeImageRepository is where this repository's cube image is published; the provider's
// default image is this repository at the provider's own version (CubeImage).
const CubeImageRepository = "ghcr.io/elasticctr/cube"

// CubeImage is this repository's image at a provider version: the default image of cube
// servers, the transfer and the training file server. `make images` tags the image with the
// version the provider is stamped with (scripts/version.sh, internal/version). A provider
// binary that carries no version ("" or "dev") has no default: "", which Validate refuses
// with NoCubeImage rather than guess a moving tag such as :latest.
func CubeImage(providerVersion string) string {
	if providerVersion == "" || providerVersion == version.Dev {
		return ""
	}
	return CubeImageRepository + ":" + providerVersion
}

// NoCubeImage is why an image is refused when a provider without a version left it unset.
const NoCubeImage = "has no default: this provider binary carries no version (built without `make build`, " +
	"outside a git checkout or with -buildvcs=false), so no published cube image is known to match it; " +
	"set it to an image your cluster can pull (`make images` builds one), or install the provider with `make install`"

// Defaults of a cube, applied by (*Cube).Defaulted.
const (
	DefaultCubeDict          = "test_dict"
	DefaultCubeShards        = 2
	DefaultCubeReplicas      = 2
	DefaultCubePort          = 8027
	DefaultTransferPort      = 8099
	DefaultTransferFilesPort = 8100
	// CubeProbePort is where each cube server answers the kubelet's probes (cube server
	// --probe-listen): apart from port, so that the probes hold none of the clients'
	// connection slots and never wait for one. port must differ from it.
	CubeProbePort = 8028
	// DefaultCubeMemory is the memory request and limit of a cube server when resources name
	// no memory; a memory request alone is also the limit (see serverResources).
	DefaultCubeMemory        = "1Gi"
	DefaultCubeMode          = "base"
	DefaultCubeTimeoutMS     = 200
	DefaultCubeRetry         = 3
	DefaultCubeStorageSize   = "10Gi"
	DefaultTransferStorage   = "20Gi"
	tokenKey                 = "token"
	cubeTokenDir             = "/etc/cube"
	componentCubeServer      = "cube-server"
	componentCubeTransfer    = "cube-transfer"
	componentCubeControl     = "cube-control"
	cubeUID                  = 65532
	cubeDataDir              = "/data"
	cubeProbePortName        = "probe" // the container port of CubeProbePort, which the probes name
	transferStatusPortName   = "http"  // the container and Service port of transfer_port
	cubeWorkDir              = "/work"
	placeholderTokenForPlans = "(generated at apply)"
)

// ShardLabel is the label whose value is a cube server's shard number ("0", "1", ...). With
// app.kubernetes.io/instance=<cube> and app.kubernetes.io/component=cube-server it selects
// the replicas of one shard: what a user's own PodDisruptionBudget selects.
const ShardLabel = "ctr.elasticctr.io/shard"

// Bounds of a cube's settings.
const (
	MinCubeShards      = 1
	MaxCubeShards      = 256
	MinCubeReplicas    = 1
	MaxCubeReplicas    = 32
	MinCubeTimeoutMS   = 1
	MaxCubeTimeoutMS   = 600000
	MaxCubeRetry       = 10
	MaxBackupRequestMS = 600000
)

// CubeModes are the transfer's modes: base versions only, or bases and their patches.
var CubeModes = []string{"base", "base_delta"}

// Cube is everything a `ctr_cube` says. Zero values mean "default", except where zero is a
// valid setting of its own: those fields are pointers, nil meaning "default".
type Cube struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Stack     string `json:"stack,omitempty"`
	// Dict is the dictionary name Paddle Serving asks for (sparse_param_service_table_name).
	Dict     string `json:"dict,omitempty"`
	Shards   int32  `json:"shards,omitempty"`
	Replicas int32  `json:"replicas,omitempty"`
	// Image runs cube server and cube transfer; the provider fills its default.
	Image           string `json:"image,omitempty"`
	ImagePullPolicy string `json:"image_pull_policy,omitempty"`
	// DonefileURL is the training job's base.txt that the transfer watches.
	DonefileURL string `json:"donefile_url"`
	Mode        string `json:"mode,omitempty"`
	// ServeVersion pins the cube to a version it keeps (the transfer's --serve-version): a
	// rollback that holds; "" follows the donefile.
	ServeVersion string `json:"serve_version,omitempty"`
	Port         int32  `json:"port,omitempty"`
	// TransferPort serves the transfer's status API; TransferFilesPort the published shards
	// that agents download, apart so that a NetworkPolicy can admit only cube servers to it.
	TransferPort      int32 `json:"transfer_port,omitempty"`
	TransferFilesPort int32 `json:"transfer_files_port,omitempty"`
	// Requests and Limits of each cube server, over DefaultCubeServerResources; see
	// serverResources for how memory follows a request.
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
	// Storage is per-replica dictionary storage: a PersistentVolumeClaim template when set,
	// else an emptyDir (dictionaries come back from the transfer after a pod restart).
	Storage         *CubeStorage `json:"storage,omitempty"`
	TransferStorage string       `json:"transfer_storage,omitempty"`
	// TransferStorageClass is the StorageClass of the transfer's claim; "" is the cluster's
	// default class.
	TransferStorageClass string `json:"transfer_storage_class,omitempty"`
	// TransferRequests and TransferLimits of the transfer, over DefaultTransferResources.
	TransferRequests map[string]string `json:"transfer_requests,omitempty"`
	TransferLimits   map[string]string `json:"transfer_limits,omitempty"`
	NodeSelector     map[string]string `json:"node_selector,omitempty"`
	Tolerations      []Toleration      `json:"tolerations,omitempty"`
	// ImagePullSecrets are Secrets (in the namespace) the servers and the transfer pull with.
	ImagePullSecrets []string `json:"image_pull_secrets,omitempty"`
	// cube.conf settings for Paddle Serving.
	TimeoutMS int32 `json:"timeout_ms,omitempty"`
	// Retry is Paddle Serving's retries on another replica; 0 turns retries off.
	Retry           *int32 `json:"retry,omitempty"`
	BackupRequestMS int32  `json:"backup_request_ms,omitempty"`
	// SecurityContext overrides the hardened defaults of the servers' and transfer's pods.
	// Deprecated, like NodeSelector and Tolerations: Pod.
	SecurityContext *SecurityContext `json:"security_context,omitempty"`
	// Pod is added to the cube servers' and the transfer's pods.
	Pod *PodSettings `json:"pod,omitempty"`
	// NetworkPolicy says who may reach the cube; nil renders the default policies.
	NetworkPolicy *NetworkPolicy `json:"network_policy,omitempty"`
	// Spread spreads each shard's replicas over nodes; nil renders the default spread.
	Spread *Spread `json:"spread,omitempty"`
	// DisruptionBudget false renders no PodDisruptionBudget (a user's own takes its place);
	// nil or true renders one per shard when replicas allow it (see disruptionBudget).
	DisruptionBudget *bool `json:"disruption_budget,omitempty"`
	// Metrics says how the servers and the transfer are scraped; nil renders the defaults
	// (see Metrics).
	Metrics *Metrics `json:"metrics,omitempty"`
	// Token is the shared control token; never in the settings annotation.
	Token string `json:"-"`
}

// CubeStorage is a per-replica volume for dictionaries.
type CubeStorage struct {
	Size         string `json:"size,omitempty"`
	StorageClass string `json:"storage_class,omitempty"`
}

// Toleration is a Kubernetes toleration.
type Toleration struct {
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"`
}

// Defaulted returns a copy with every default filled in.
func (c Cube) Defaulted() Cube {
	d := c
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	num := func(n *int32, v int32) {
		if *n == 0 {
			*n = v
		}
	}
	def(&d.Stack, d.Name)
	def(&d.Dict, DefaultCubeDict)
	def(&d.Mode, DefaultCubeMode)
	def(&d.ImagePullPolicy, DefaultPullPolicy)
	def(&d.TransferStorage, DefaultTransferStorage)
	num(&d.Shards, DefaultCubeShards)
	num(&d.Replicas, DefaultCubeReplicas)
	num(&d.Port, DefaultCubePort)
	num(&d.TransferPort, DefaultTransferPort)
	num(&d.TransferFilesPort, DefaultTransferFilesPort)
	num(&d.TimeoutMS, DefaultCubeTimeoutMS)
	if d.Retry == nil {
		d.Retry = ptr.To[int32](DefaultCubeRetry)
	}
	if d.Token == "" {
		d.Token = placeholderTokenForPlans
	}
	d.Pod = mergeLegacy(d.Pod, nil, d.SecurityContext, d.NodeSelector, d.Tolerations)
	d.SecurityContext, d.NodeSelector, d.Tolerations = nil, nil, nil
	return d
}

func (c Cube) owner() string { return Owner(CubeType, c.Name) }
func (c Cube) labels(component string) map[string]string {
	return commonLabels(c.Stack, c.Name, c.owner(), component)
}

// ShardService is the headless Service of shard i: its DNS name resolves to the ready
// replicas of the shard.
func (c Cube) ShardService(i int32) string { return cubeShardName(c.Name, i) }

// ReplicasService is the headless Service that governs every shard's StatefulSet and
// publishes its pods' DNS names whether they are ready or not: the transfer must reach a
// replica that serves nothing yet (first rollout, a restart with an empty disk, a new
// replica) to make it serve. Clients use the shard Services, which list ready pods only.
func (c Cube) ReplicasService() string { return cubeReplicasName(c.Name) }

// ReplicaAddr is the stable address of replica r of shard i (a StatefulSet pod), through
// ReplicasService.
func (c Cube) ReplicaAddr(i, r int32) string {
	return fmt.Sprintf("%s-%d.%s.%s.svc:%d", c.ShardService(i), r, c.ReplicasService(), c.Namespace, c.Port)
}

// TransferURL is the in-cluster URL of the transfer's status API.
func (c Cube) TransferURL() string {
	return fmt.Sprintf("http://%s.%s.svc:%d", c.TransferService(), c.Namespace, c.TransferPort)
}

// TransferFilesURL is the in-cluster URL at which cube servers download published shards
// (<URL>/files/<version>/...): the transfer's --public-url.
func (c Cube) TransferFilesURL() string {
	return fmt.Sprintf("http://%s.%s.svc:%d", c.TransferService(), c.Namespace, c.TransferFilesPort)
}

// TransferService is the Service of the transfer's status API and files.
func (c Cube) TransferService() string { return cubeTransferName(c.Name) }

// TransferStatusPath is the transfer's status document (api.Status), GET on transfer_port,
// as the API server's service proxy takes it (no leading slash).
var TransferStatusPath = strings.TrimPrefix(api.StatusPath, "/")

// ControlToken returns the token stored in a cube's control Secret ("" when there is none).
func ControlToken(secret *unstructured.Unstructured) string { return SecretValue(secret, tokenKey) }

// Endpoints are the shards' Service addresses, shard by shard (on a defaulted cube).
func (c Cube) Endpoints() []string {
	out := make([]string, c.Shards)
	for i := range out {
		out[i] = fmt.Sprintf("%s.%s.svc:%d", c.ShardService(int32(i)), c.Namespace, c.Port)
	}
	return out
}

// CubeConf is Paddle Serving's cube.conf for this cube (on a defaulted cube). Each shard is
// named "http://<shard service>:<port>": brpc's domain naming service re-resolves that name
// every few seconds and gets the addresses of the shard's ready replicas, so a cube pod that
// restarts with a new IP is picked up. A "list://" of pod names would be resolved only once,
// when Serving starts, and go stale.
func (c Cube) CubeConf() string {
	d := api.DictConf{DictName: c.Dict, Shard: int(c.Shards), Dup: int(c.Replicas), Timeout: int(c.TimeoutMS), Retry: int(*c.Retry),
		BackupRequest: int(c.BackupRequestMS), Type: "ipport_list", LoadBalancer: "rr"}
	for _, e := range c.Endpoints() {
		d.Nodes = append(d.Nodes, api.Node{IPPortList: "http://" + e})
	}
	b, _ := json.MarshalIndent([]api.DictConf{d}, "", "  ") // plain structs: cannot fail
	return string(b) + "\n"
}

// Render is the cube's objects and the settings they were rendered from, every default filled
// in (see TrainingJob.Render).
func (c Cube) Render() (Cube, Set, error) {
	set, err := RenderCube(c)
	return c.Defaulted(), set, err
}

// RenderCube renders a cube's objects in apply order: the control token Secret, the
// NetworkPolicies (before any pod they protect), the replicas' governing Service, per shard a
// headless Service and a StatefulSet, then the transfer's claim and Service, the PodMonitor
// when metrics ask for one, and the transfer's Deployment (its primary object, carrying the
// settings annotation).
func RenderCube(given Cube) (Set, error) {
	return render(given, func(set Set) *unstructured.Unstructured { return set[len(set)-1].Object })
}

// forAnnotation is the cube as the settings annotation stores it: without env values.
func (c Cube) forAnnotation() Cube {
	out := c
	out.Pod = c.Pod.forAnnotation()
	return out
}

// RestoreEnv fills the env values the settings annotation leaves out from the live transfer.
func (c *Cube) RestoreEnv(transfer *unstructured.Unstructured) {
	if c.Pod != nil {
		RestoreEnv(c.Pod.Env, transfer)
	}
}

// objects renders a defaulted cube's objects, the transfer's Deployment last.
func (c Cube) objects() Set {
	var set Set
	add := func(o Object) { set = append(set, o) }
	if sa := c.Pod.ownServiceAccount(c.Name); sa != "" {
		add(c.Pod.serviceAccount(sa, c.Namespace, c.labels(componentCubeControl)))
	}
	add(toObject(&corev1.Secret{
		TypeMeta:   kindSecret,
		ObjectMeta: meta(cubeControlName(c.Name), c.Namespace, c.labels(componentCubeControl)),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{tokenKey: []byte(c.Token)},
	}))
	for _, np := range c.networkPolicies() {
		add(toObject(np))
	}
	add(toObject(&corev1.Service{
		TypeMeta:   kindService,
		ObjectMeta: meta(c.ReplicasService(), c.Namespace, c.labels(componentCubeServer)),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 map[string]string{LabelInstance: c.Name, LabelComponent: componentCubeServer},
			Ports:                    []corev1.ServicePort{{Name: "cube", Port: c.Port, TargetPort: intstr.FromString("cube"), Protocol: corev1.ProtocolTCP}},
		},
	}))
	for i := int32(0); i < c.Shards; i++ {
		add(toObject(c.shardService(i)))
		if c.disruptionBudget() {
			add(toObject(c.shardDisruptionBudget(i)))
		}
		add(toObject(c.shardStatefulSet(i)))
	}
	add(toObject(c.transferClaim()))
	add(toObject(&corev1.Service{
		TypeMeta:   kindService,
		ObjectMeta: meta(c.TransferService(), c.Namespace, c.labels(componentCubeTransfer)),
		Spec: corev1.ServiceSpec{
			Selector: c.transferSelector(),
			Ports: []corev1.ServicePort{
				{Name: transferStatusPortName, Port: c.TransferPort, TargetPort: intstr.FromString(transferStatusPortName), Protocol: corev1.ProtocolTCP},
				{Name: "files", Port: c.TransferFilesPort, TargetPort: intstr.FromString("files"), Protocol: corev1.ProtocolTCP},
			},
		},
	}))
	if c.Metrics.podMonitor() {
		add(c.podMonitor())
	}
	add(toObject(c.transferDeployment()))
	return set
}

// transferClaim is the transfer's work volume: downloads, built shards and its state.
func (c Cube) transferClaim() *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   kindClaim,
		ObjectMeta: meta(c.TransferService(), c.Namespace, c.labels(componentCubeTransfer)),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(c.TransferStorage)}},
		},
	}
	if c.TransferStorageClass != "" {
		pvc.Spec.StorageClassName = ptr.To(c.TransferStorageClass)
	}
	return pvc
}

// ServerClaimsSelector selects the claims of every cube server (made by the shards'
// StatefulSets, which label them with their selector, not with the owner label).
func (c Cube) ServerClaimsSelector() map[string]string { return c.serverSelector() }

// serverSelector selects the cube servers of every shard.
func (c Cube) serverSelector() map[string]string {
	return map[string]string{LabelInstance: c.Name, LabelComponent: componentCubeServer}
}

// shardLabels are the labels of shard i's objects and pods: the cube servers' with the shard's
// number under ShardLabel.
func (c Cube) shardLabels(i int32) map[string]string {
	l := c.labels(componentCubeServer)
	l[ShardLabel] = strconv.Itoa(int(i))
	return l
}

// ShardSelector selects the cube servers of shard i, and no other pod: what the shard's
// Service, StatefulSet, PodDisruptionBudget and spread select, and what a budget of a
// user's own selects.
func (c Cube) ShardSelector(i int32) map[string]string {
	l := c.serverSelector()
	l[ShardLabel] = strconv.Itoa(int(i))
	return l
}

// transferSelector selects the transfer's pod.
func (c Cube) transferSelector() map[string]string {
	return map[string]string{LabelInstance: c.Name, LabelComponent: componentCubeTransfer}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// CubeFromSettings decodes the settings annotation of a cube's transfer Deployment.
func CubeFromSettings(s string) (Cube, error) { return fromSettings[Cube](s) }

// CubeLayoutServes reads the transfer's status (GET /status) and reports whether the cube
// serves in a layout of `shards` shards: one version, other than `before` (the version served
// in the old layout), on every replica of every shard, with nothing in flight. The removed
// shards of a shrinking cube are deleted only then.
func CubeLayoutServes(status []byte, shards int32, before string) (bool, string, error) {
	st, err := DecodeTransferStatus(status)
	if err != nil {
		return false, "", err
	}
	state := fmt.Sprintf("replicas serve %q on %d shards", st.ServedVersion, len(st.Shards))
	if st.InFlight != "" {
		state += fmt.Sprintf(", %q in flight", st.InFlight)
	}
	if st.ServedVersion == "" || st.ServedVersion == before || st.InFlight != "" || len(st.Shards) != int(shards) {
		return false, state, nil
	}
	if lag := st.Lagging(); len(lag) > 0 {
		return false, state + fmt.Sprintf(", shard %d lags", lag[0].Shard), nil
	}
	return true, state, nil
}

// DecodeTransferStatus decodes the transfer's GET /status.
func DecodeTransferStatus(b []byte) (api.Status, error) {
	var st api.Status
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("transfer status: %w", err)
	}
	return st, nil
}
