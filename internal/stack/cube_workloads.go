package stack

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func (c Cube) shardService(i int32) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   kindService,
		ObjectMeta: meta(c.ShardService(i), c.Namespace, c.shardLabels(i)),
		Spec: corev1.ServiceSpec{
			// Headless: the name resolves to the ready replicas themselves, what brpc's domain
			// naming service balances over. (Each pod's own DNS name is ReplicasService's.)
			ClusterIP: corev1.ClusterIPNone,
			Selector:  c.ShardSelector(i),
			Ports:     []corev1.ServicePort{{Name: "cube", Port: c.Port, TargetPort: intstr.FromString("cube"), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// serverResources are a cube server's requests and limits: the user's over
// DefaultCubeServerResources, where a memory request given alone is also the limit. The
// dictionary is mapped from disk: its page cache counts against the limit but is reclaimed
// under pressure (lookups then read from disk), so an undersized limit slows a server rather
// than killing it, while the server's own memory stays bounded (--max-inflight-bytes).
func (c Cube) serverResources() corev1.ResourceRequirements {
	lim := maps.Clone(c.Limits)
	mem := string(corev1.ResourceMemory)
	if _, ok := lim[mem]; !ok {
		if r, ok := c.Requests[mem]; ok {
			if lim == nil {
				lim = map[string]string{}
			}
			lim[mem] = r
		}
	}
	return DefaultCubeServerResources.Over(c.Requests, lim).requirements()
}

func (c Cube) tokenVolume() (corev1.Volume, corev1.VolumeMount) {
	return corev1.Volume{Name: "control-token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: cubeControlName(c.Name)}}},
		corev1.VolumeMount{Name: "control-token", MountPath: cubeTokenDir, ReadOnly: true}
}

func (c Cube) shardStatefulSet(i int32) *appsv1.StatefulSet {
	l := c.shardLabels(i)
	tokVol, tokMount := c.tokenVolume()
	container := corev1.Container{
		Name:            "cube",
		Image:           c.Image,
		ImagePullPolicy: corev1.PullPolicy(c.ImagePullPolicy),
		Args: []string{"server", "--data", cubeDataDir, "--shard", strconv.Itoa(int(i)),
			"--listen", "0.0.0.0:" + strconv.Itoa(int(c.Port)), "--probe-listen", "0.0.0.0:" + strconv.Itoa(CubeProbePort),
			"--control-token-file", cubeTokenDir + "/" + tokenKey,
			"--agent", "--source-url", c.TransferFilesURL() + "/files/"},
		Ports: []corev1.ContainerPort{{Name: "cube", ContainerPort: c.Port, Protocol: corev1.ProtocolTCP},
			{Name: cubeProbePortName, ContainerPort: CubeProbePort, Protocol: corev1.ProtocolTCP}},
		// The probes go to a port of their own, so that clients holding every connection
		// slot of port cannot fail them (and have the pod restarted).
		// Ready means "serving a version": brpc's naming then only returns replicas that answer.
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString(cubeProbePortName)}},
			PeriodSeconds: 2},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString(cubeProbePortName)}},
			PeriodSeconds: 10, FailureThreshold: 3},
		Resources:    c.serverResources(),
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: cubeDataDir}, tokMount},
	}
	sts := &appsv1.StatefulSet{
		TypeMeta:   kindStatefulSet,
		ObjectMeta: meta(c.ShardService(i), c.Namespace, l),
		Spec: appsv1.StatefulSetSpec{
			ServiceName: c.ReplicasService(),
			Replicas:    ptr.To(c.Replicas),
			// Parallel: a shard's replicas start (and are scaled) together, as the transfer's first
			// rollout prepares every replica before any serves. It changes scaling only;
			// see shardUpdateStrategy for how a changed template rolls out.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      shardUpdateStrategy(),
			Selector:            &metav1.LabelSelector{MatchLabels: c.ShardSelector(i)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					Containers:                   []corev1.Container{container},
					Volumes:                      []corev1.Volume{tokVol},
					ImagePullSecrets:             pullSecrets(c.ImagePullSecrets),
				},
			},
		},
	}
	if c.Storage != nil {
		pvc := corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(orDefault(c.Storage.Size, DefaultCubeStorageSize))}},
			},
		}
		if c.Storage.StorageClass != "" {
			pvc.Spec.StorageClassName = ptr.To(c.Storage.StorageClass)
		}
		sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{pvc}
		// The claims go with the StatefulSet (destroy, a removed shard); a replica scaled
		// away keeps its claim until then, as a scale back up reuses it.
		sts.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
			WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		}
	} else {
		sts.Spec.Template.Spec.Volumes = append(sts.Spec.Template.Spec.Volumes,
			corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	c.spreadShard(i, &sts.Spec.Template.Spec)
	applyPod(&sts.Spec.Template, cubeImageUser, c.Pod, c.Pod.ownServiceAccount(c.Name))
	withScrapeAnnotations(&sts.Spec.Template, c.scrapeAnnotations(CubeProbePort))
	return sts
}

func (c Cube) transferDeployment() *appsv1.Deployment {
	l := c.labels(componentCubeTransfer)
	tokVol, tokMount := c.tokenVolume()
	args := []string{"transfer", "--donefile", c.DonefileURL, "--dict", c.Dict}
	for i := int32(0); i < c.Shards; i++ {
		var addrs []string
		for r := int32(0); r < c.Replicas; r++ {
			addrs = append(addrs, c.ReplicaAddr(i, r))
		}
		args = append(args, "--shard-replicas", fmt.Sprintf("%d=%s", i, strings.Join(addrs, ",")))
	}
	args = append(args, "--work", cubeWorkDir, "--listen", "0.0.0.0:"+strconv.Itoa(int(c.TransferPort)),
		"--files-listen", "0.0.0.0:"+strconv.Itoa(int(c.TransferFilesPort)),
		"--control-token-file", cubeTokenDir+"/"+tokenKey, "--public-url", c.TransferFilesURL(), "--mode", c.Mode)
	if c.ServeVersion != "" {
		args = append(args, "--serve-version", c.ServeVersion)
	}
	dep := &appsv1.Deployment{
		TypeMeta:   kindDeployment,
		ObjectMeta: meta(c.TransferService(), c.Namespace, l),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			// One transfer at a time: two would race on the rollout and its state.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Selector: &metav1.LabelSelector{MatchLabels: c.transferSelector()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					ImagePullSecrets:             pullSecrets(c.ImagePullSecrets),
					Containers: []corev1.Container{{
						Name: "transfer", Image: c.Image, ImagePullPolicy: corev1.PullPolicy(c.ImagePullPolicy), Args: args,
						Ports: []corev1.ContainerPort{{Name: transferStatusPortName, ContainerPort: c.TransferPort, Protocol: corev1.ProtocolTCP},
							{Name: "files", ContainerPort: c.TransferFilesPort, Protocol: corev1.ProtocolTCP}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString(transferStatusPortName)}}},
						Resources:      DefaultTransferResources.Over(c.TransferRequests, c.TransferLimits).requirements(),
						VolumeMounts:   []corev1.VolumeMount{{Name: "work", MountPath: cubeWorkDir}, tokMount},
					}},
					Volumes: []corev1.Volume{tokVol, {Name: "work", VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.TransferService()}}}},
				},
			},
		},
	}
	applyPod(&dep.Spec.Template, cubeImageUser, c.Pod, c.Pod.ownServiceAccount(c.Name))
	withScrapeAnnotations(&dep.Spec.Template, c.scrapeAnnotations(c.TransferPort))
	return dep
}

func tolerations(ts []Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for _, t := range ts {
		out = append(out, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return out
}
