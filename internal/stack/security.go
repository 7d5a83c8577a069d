package stack

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// SecurityContext relaxes or tightens the hardened defaults of a workload's pods. Every field
// left nil (or empty) keeps the default of the image the pod runs; see hardenedPod. The same
// shape serves every workload resource, so that it can move into a shared pod-settings block.
type SecurityContext struct {
	RunAsUser    *int64 `json:"run_as_user,omitempty"`
	RunAsGroup   *int64 `json:"run_as_group,omitempty"`
	FSGroup      *int64 `json:"fs_group,omitempty"`
	RunAsNonRoot *bool  `json:"run_as_non_root,omitempty"`
	// ReadOnlyRootFilesystem and AllowPrivilegeEscalation are set on every container.
	ReadOnlyRootFilesystem   *bool `json:"read_only_root_filesystem,omitempty"`
	AllowPrivilegeEscalation *bool `json:"allow_privilege_escalation,omitempty"`
	// SeccompProfile is one of SeccompProfiles; empty keeps RuntimeDefault.
	SeccompProfile string `json:"seccomp_profile,omitempty"`
	// AddCapabilities are added back after every capability is dropped, e.g. NET_BIND_SERVICE.
	AddCapabilities []string `json:"add_capabilities,omitempty"`
}

// SeccompProfiles are the seccomp profiles a pod may ask for.
var SeccompProfiles = []string{string(corev1.SeccompProfileTypeRuntimeDefault), string(corev1.SeccompProfileTypeUnconfined)}

// imageUser is what an image allows: the user it runs as, and whether it runs with a
// read-only root filesystem. It decides the hardened defaults beyond those of every pod.
type imageUser struct {
	// UID runs the pod as this non-root user and group, and gives its volumes to that group
	// (fsGroup) so that it can write them; 0 leaves the image's user (root for Paddle's images).
	UID int64
	// ReadOnlyRoot mounts the root filesystem read-only: the image writes only to its volumes.
	ReadOnlyRoot bool
	// VolumeGroup, when UID is 0, is the fsGroup of the pod: the group of the volumes it
	// shares with pods of this repository's image, so that both may write them.
	VolumeGroup int64
}

// The images the provider runs by default.
var (
	// cubeImageUser is this repository's image (cube server, transfer, file server): static,
	// no shell, user 65532, writes only to its data and work volumes.
	cubeImageUser = imageUser{UID: cubeUID, ReadOnlyRoot: true}
	// servingImageUser is Paddle Serving's image: it runs as root and writes inside its own
	// filesystem, so neither a user nor a read-only root is forced. Its volumes take the
	// cube image's group: the init container (that image) writes the launcher's.
	servingImageUser = imageUser{VolumeGroup: cubeUID}
	// trainingImageUser is Paddle's training images, root like Serving's. Their pods share
	// the model-output volume with the file server (this repository's image), so they give it
	// the file server's group: both can write it, though no capability is left to root.
	trainingImageUser = imageUser{VolumeGroup: cubeUID}
)

// hardenedPod returns the securityContext of a pod and of each of its containers: a
// RuntimeDefault seccomp profile, no privilege escalation and every capability dropped on
// every pod, plus what the image allows (a non-root user, a read-only root filesystem), then
// the user's overrides. It is the one place where pods get their security settings.
func hardenedPod(img imageUser, o *SecurityContext) (*corev1.PodSecurityContext, *corev1.SecurityContext) {
	pod := &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if img.UID != 0 {
		pod.RunAsNonRoot, pod.RunAsUser, pod.RunAsGroup = ptr.To(true), ptr.To(img.UID), ptr.To(img.UID)
		pod.FSGroup = ptr.To(img.UID)
	} else if img.VolumeGroup != 0 {
		pod.FSGroup = ptr.To(img.VolumeGroup)
	}
	ctr := &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	if img.ReadOnlyRoot {
		ctr.ReadOnlyRootFilesystem = ptr.To(true)
	}
	override(pod, ctr, o)
	if pod.FSGroup != nil {
		// Change the volumes' group once, not on every mount of a volume full of model files.
		pod.FSGroupChangePolicy = ptr.To(corev1.FSGroupChangeOnRootMismatch)
	}
	return pod, ctr
}

// override applies a security_context to hardened defaults.
func override(pod *corev1.PodSecurityContext, ctr *corev1.SecurityContext, o *SecurityContext) {
	if o == nil {
		return
	}
	set := func(dst **int64, v *int64) {
		if v != nil {
			*dst = ptr.To(*v)
		}
	}
	set(&pod.RunAsUser, o.RunAsUser)
	set(&pod.RunAsGroup, o.RunAsGroup)
	set(&pod.FSGroup, o.FSGroup)
	if o.RunAsNonRoot != nil {
		pod.RunAsNonRoot = ptr.To(*o.RunAsNonRoot)
	}
	if o.SeccompProfile != "" {
		pod.SeccompProfile.Type = corev1.SeccompProfileType(o.SeccompProfile)
	}
	if o.ReadOnlyRootFilesystem != nil {
		ctr.ReadOnlyRootFilesystem = ptr.To(*o.ReadOnlyRootFilesystem)
	}
	if o.AllowPrivilegeEscalation != nil {
		ctr.AllowPrivilegeEscalation = ptr.To(*o.AllowPrivilegeEscalation)
	}
	for _, c := range o.AddCapabilities {
		ctr.Capabilities.Add = append(ctr.Capabilities.Add, corev1.Capability(c))
	}
}

// securityContext checks what the schema cannot: settings that contradict each other, and
// capability names.
func (c *checker) securityContext(path string, o *SecurityContext) {
	if o == nil {
		return
	}
	if o.RunAsNonRoot != nil && *o.RunAsNonRoot && o.RunAsUser != nil && *o.RunAsUser == 0 {
		c.bad(path+".run_as_non_root", "contradicts run_as_user = 0: the kubelet would refuse to start the pod; set run_as_user to another id, or leave run_as_non_root out")
	}
	for i, capName := range o.AddCapabilities {
		if capName == "" || strings.ToUpper(capName) != capName || strings.HasPrefix(capName, "CAP_") || capName == "ALL" {
			c.bad(fmt.Sprintf("%s.add_capabilities[%d]", path, i), "%q is not a capability name as Kubernetes spells it, e.g. NET_BIND_SERVICE or CHOWN", capName)
		}
	}
}
