package stack

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Every kind and every object name is declared here once. Rendering stamps these kinds and
// names on the objects; the kind lists (what a resource prunes and deletes) and the
// references the provider reads by name (at import) are built from the same declarations.

var (
	kindSecret         = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
	kindConfigMap      = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	kindService        = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	kindServiceAccount = metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}
	kindClaim          = metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}
	kindRole           = metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}
	kindRoleBinding    = metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}
	kindDeployment     = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	kindStatefulSet    = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}
	kindNetworkPolicy  = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}
	kindVolcanoJob     = metav1.TypeMeta{APIVersion: "batch.volcano.sh/v1alpha1", Kind: "Job"}
	kindAutoscaler     = metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"}
	kindDisruption     = metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"}
	// The Prometheus Operator's (a CRD): rendered only when a cube's metrics ask for it.
	kindPodMonitor = metav1.TypeMeta{APIVersion: "monitoring.coreos.com/v1", Kind: "PodMonitor"}
	kindQueue      = metav1.TypeMeta{APIVersion: "scheduling.volcano.sh/v1beta1", Kind: "Queue"}
	// Made by controllers from ours, carrying our labels.
	kindPod        = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	kindReplicaSet = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"}
	kindPodGroup   = metav1.TypeMeta{APIVersion: "scheduling.volcano.sh/v1beta1", Kind: "PodGroup"}
)

// kindsFromCRDs say what serves the kinds ctr renders that Kubernetes itself does not, and
// what to do about it: the error of an apply to a cluster without them says so.
var kindsFromCRDs = map[schema.GroupKind]string{
	schema.FromAPIVersionAndKind(kindVolcanoJob.APIVersion, kindVolcanoJob.Kind).GroupKind(): "Volcano Jobs need Volcano, see ctr_cluster",
	schema.FromAPIVersionAndKind(kindPodGroup.APIVersion, kindPodGroup.Kind).GroupKind():     "pod groups need Volcano, see ctr_cluster",
	schema.FromAPIVersionAndKind(kindPodMonitor.APIVersion, kindPodMonitor.Kind).GroupKind(): "ctr_cube renders a PodMonitor for metrics.pod_monitor = true, " +
		"and PodMonitors come with the Prometheus Operator: install it (or its CRDs), or set metrics.pod_monitor = false",
}

// MissingKindHint says what a cluster that does not serve a kind ctr renders lacks, and what
// to do: "" for a kind of Kubernetes itself.
func MissingKindHint(gvk schema.GroupVersionKind) string { return kindsFromCRDs[gvk.GroupKind()] }

func gvks(kinds ...metav1.TypeMeta) []schema.GroupVersionKind {
	out := make([]schema.GroupVersionKind, len(kinds))
	for i, k := range kinds {
		out[i] = schema.FromAPIVersionAndKind(k.APIVersion, k.Kind)
	}
	return out
}

// The kinds each resource renders, in apply order: what it prunes and deletes.
var (
	TrainingJobKinds = gvks(kindServiceAccount, kindRole, kindRoleBinding, kindSecret, kindConfigMap, kindClaim,
		kindDeployment, kindService, kindVolcanoJob)
	CubeKinds = gvks(kindServiceAccount, kindSecret, kindNetworkPolicy, kindService, kindDisruption, kindStatefulSet,
		kindClaim, kindPodMonitor, kindDeployment)
	ServingKinds = gvks(kindServiceAccount, kindConfigMap, kindDisruption, kindService, kindDeployment, kindAutoscaler)
	// ControllerKinds are objects that controllers create from ours, carrying our labels:
	// deletion waits for them too.
	ControllerKinds = gvks(kindPod, kindReplicaSet, kindPodGroup)
)

// ref is a reference to an object, for reading it.
func ref(kind metav1.TypeMeta, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(kind.APIVersion)
	u.SetKind(kind.Kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// Names of a training job's objects. The Volcano Job, its ServiceAccount, Role and
// RoleBinding take the job's own name; the file server's ServiceAccount (when pod settings
// ask ctr for one) its Deployment's. A cube's and a serving's take the resource's name.
func fileServerName(job string) string    { return job + "-fileserver" }
func uploadSecretName(job string) string  { return job + "-upload" }
func datasetSecretName(job string) string { return job + "-dataset" }
func slotConfigName(job string) string    { return job + "-slot-conf" }
func modelClaimName(job string) string    { return job + "-model" }
func modelExportName(job string) string   { return job + "-model-export" }

// Names of a cube's objects.
func cubeControlName(cube string) string      { return cube + "-control" }
func cubeTransferName(cube string) string     { return cube + "-transfer" }
func cubeReplicasName(cube string) string     { return cube + "-replicas" }
func cubeServerPolicyName(cube string) string { return cube + "-server" }
func cubePodMonitorName(cube string) string   { return cube }
func cubeShardName(cube string, i int32) string {
	return fmt.Sprintf("%s-shard-%d", cube, i)
}

// Names of a serving's objects. Its Deployment, Service, HorizontalPodAutoscaler and
// PodDisruptionBudget take the serving's own name.
func servingConfName(serving string) string { return serving + "-cube-conf" }

// VolcanoJobRef is a training job's Volcano Job, its primary object (with the settings).
func VolcanoJobRef(namespace, name string) *unstructured.Unstructured {
	return ref(kindVolcanoJob, namespace, name)
}

// VolcanoJobKey is the manifests key of a training job's Volcano Job.
func VolcanoJobKey(name string) string { return Key(VolcanoJobRef("", name)) }

// FileServerRef is a training job's file server Deployment.
func FileServerRef(namespace, name string) *unstructured.Unstructured {
	return ref(kindDeployment, namespace, fileServerName(name))
}

// FileServerKey is the manifests key of a training job's file server Deployment.
func FileServerKey(name string) string { return Key(FileServerRef("", name)) }

// DatasetSecretRef is the Secret that holds a training job's HDFS UGI.
func DatasetSecretRef(namespace, name string) *unstructured.Unstructured {
	return ref(kindSecret, namespace, datasetSecretName(name))
}

// UploadSecretRef is the Secret that holds a training job's upload token.
func UploadSecretRef(namespace, name string) *unstructured.Unstructured {
	return ref(kindSecret, namespace, uploadSecretName(name))
}

// CubeTransferRef is a cube's transfer Deployment, its primary object (with the settings).
func CubeTransferRef(namespace, name string) *unstructured.Unstructured {
	return ref(kindDeployment, namespace, cubeTransferName(name))
}

// CubeTransferKey is the manifests key of a cube's transfer Deployment.
func CubeTransferKey(name string) string { return Key(CubeTransferRef("", name)) }

// CubeControlSecretRef is the Secret that holds a cube's control token.
func CubeControlSecretRef(namespace, name string) *unstructured.Unstructured {
	return ref(kindSecret, namespace, cubeControlName(name))
}

// ServingDeploymentRef is a serving's Deployment, its primary object (with the settings).
func ServingDeploymentRef(namespace, name string) *unstructured.Unstructured {
	return ref(kindDeployment, namespace, name)
}

// ServingDeploymentKey is the manifests key of a serving's Deployment.
func ServingDeploymentKey(name string) string { return Key(ServingDeploymentRef("", name)) }

// ServingAutoscalerKey is the manifests key of a serving's HorizontalPodAutoscaler.
func ServingAutoscalerKey(name string) string { return Key(ref(kindAutoscaler, "", name)) }

// ServingDisruptionBudgetKey is the manifests key of a serving's PodDisruptionBudget.
func ServingDisruptionBudgetKey(name string) string { return Key(ref(kindDisruption, "", name)) }

// ServingServiceKey is the manifests key of a serving's Service.
func ServingServiceKey(name string) string { return Key(ref(kindService, "", name)) }

// FileServerServiceKey is the manifests key of a training job's file server Service.
func FileServerServiceKey(name string) string { return Key(ref(kindService, "", fileServerName(name))) }
