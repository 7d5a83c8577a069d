package stack

import (
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func (j TrainingJob) renderClaim() *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   kindClaim,
		ObjectMeta: meta(j.claimName(), j.Namespace, j.labels(componentModelOutput)),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.PersistentVolumeAccessMode(j.ModelOutput.AccessMode)},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(j.ModelOutput.Size)},
			},
		},
	}
	if j.ModelOutput.StorageClass != "" {
		pvc.Spec.StorageClassName = ptr.To(j.ModelOutput.StorageClass)
	}
	if j.ModelOutput.Retained() {
		pvc.Annotations = map[string]string{RetainAnnotation: "true"}
	}
	return pvc
}

func (j TrainingJob) fileServerSelector() map[string]string {
	return map[string]string{LabelInstance: j.Name, LabelComponent: componentFileServer}
}

func (j TrainingJob) renderFileServer() *appsv1.Deployment {
	labels := j.labels(componentFileServer)
	mounts := []corev1.VolumeMount{{Name: "model-output", MountPath: cleanJoin(fileServerRoot, j.ModelOutput.MountPath), ReadOnly: !j.FileServer.Upload}}
	volumes := []corev1.Volume{j.modelVolume()}
	var annotations map[string]string
	if j.SlotConfig != "" {
		// slot.conf at the root, where ElasticCTR's scripts fetch it. A file mounted by
		// subPath does not follow its ConfigMap, so a new slot config rolls the pod.
		mounts = append(mounts, corev1.VolumeMount{Name: "slot-conf", MountPath: cleanJoin(fileServerRoot, slotConfigKey), SubPath: slotConfigKey, ReadOnly: true})
		volumes = append(volumes, j.slotConfigVolume())
		annotations = map[string]string{SlotConfigChecksumAnnotation: checksum(j.SlotConfig)}
	}
	if j.FileServer.TokenUploads() {
		mounts = append(mounts, corev1.VolumeMount{Name: "upload-token", MountPath: uploadTokenDir, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: "upload-token", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: uploadSecretName(j.Name)}}})
	}
	dep := &appsv1.Deployment{
		TypeMeta:   kindDeployment,
		ObjectMeta: meta(fileServerName(j.Name), j.Namespace, labels),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(j.FileServer.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: j.fileServerSelector()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					ImagePullSecrets:             pullSecrets(j.ImagePullSecrets),
					Containers: []corev1.Container{{
						Name:  "fileserver",
						Image: j.FileServer.Image,
						Args:  j.fileServerArgs(),
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: j.FileServer.Port, Protocol: corev1.ProtocolTCP}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")},
						}},
						Resources:    DefaultFileServerResources.Over(j.FileServer.Requests, j.FileServer.Limits).requirements(),
						VolumeMounts: mounts,
					}},
					Volumes: volumes,
				},
			},
		},
	}
	applyPod(&dep.Spec.Template, cubeImageUser, j.FileServer.Pod, j.FileServer.Pod.ownServiceAccount(fileServerName(j.Name)))
	return dep
}

// renderModelExport is the model-output step: one pod (Recreate: never two exporters at once)
// of this repository's image running `cube export --watch` on the model volume, beside the
// file server (a ReadWriteOnce volume mounts on one node only).
func (j TrainingJob) renderModelExport() *appsv1.Deployment {
	labels := j.labels(componentModelExport)
	me := j.ModelExport
	root := j.ModelOutput.MountPath
	out := cleanJoin(root, strings.TrimSuffix(j.ModelOutput.DonefilePath, modelExportDonefileSuffix))
	args := []string{"export", "--watch", "--format", me.Format, "--in", cleanJoin(root, me.Path), "--out", strings.TrimSuffix(out, "/"),
		"--interval", strconv.FormatInt(me.IntervalSeconds, 10) + "s"}
	if me.Var != "" {
		args = append(args, "--var", me.Var)
	}
	if me.EmbedxDim > 0 {
		args = append(args, "--embedx-dim", strconv.FormatInt(me.EmbedxDim, 10))
	}
	if me.ServingModel != "" {
		args = append(args, "--serving-model", me.ServingModel)
	}
	dep := &appsv1.Deployment{
		TypeMeta:   kindDeployment,
		ObjectMeta: meta(modelExportName(j.Name), j.Namespace, labels),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelInstance: j.Name, LabelComponent: componentModelExport}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					ImagePullSecrets:             pullSecrets(j.ImagePullSecrets),
					Containers: []corev1.Container{{
						Name:         "export",
						Image:        j.FileServer.Image,
						Args:         args,
						Resources:    DefaultModelExportResources.Over(me.Requests, me.Limits).requirements(),
						VolumeMounts: []corev1.VolumeMount{{Name: "model-output", MountPath: root}},
					}},
					Volumes: []corev1.Volume{j.modelVolume()},
				},
			},
		},
	}
	if j.ModelOutput.AccessMode == AccessReadWriteOnce {
		dep.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: j.fileServerSelector()},
				TopologyKey:   "kubernetes.io/hostname",
			}},
		}}
	}
	applyPod(&dep.Spec.Template, cubeImageUser, j.FileServer.Pod, j.FileServer.Pod.ownServiceAccount(fileServerName(j.Name)))
	return dep
}

func (j TrainingJob) fileServerArgs() []string {
	args := []string{"fileserver", "--root", fileServerRoot, "--listen", "0.0.0.0:" + strconv.Itoa(int(j.FileServer.Port))}
	switch {
	case j.FileServer.TokenUploads():
		args = append(args, "--upload", "--upload-token-file", uploadTokenDir+"/"+tokenKey)
	case j.FileServer.Upload:
		// upload_insecure: anyone who reaches the file server may write the model output.
		args = append(args, "--upload", "--upload-insecure")
	}
	return args
}

func (j TrainingJob) renderFileServerService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   kindService,
		ObjectMeta: serviceMeta(meta(fileServerName(j.Name), j.Namespace, j.labels(componentFileServer)), j.FileServer.ServiceAnnotations),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceType(j.FileServer.ServiceType),
			Selector: j.fileServerSelector(),
			Ports: []corev1.ServicePort{{Name: "http", Port: j.FileServer.Port, TargetPort: intstr.FromString("http"),
				Protocol: corev1.ProtocolTCP}},
		},
	}
}
