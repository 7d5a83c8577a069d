package provider

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	corev1 "k8s.io/api/core/v1"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// The pod block (issue 12, "Every pod, on every resource"): each knob rendered and applied,
// checked on the live objects; secret values never in the plan's manifests nor in the
// settings annotation; no diff after apply; import.

const (
	podPriorityClass = "ctr-acc-high"
	// podSecretValue is the value of the Secret the pods read by reference.
	podSecretValue = "s3cr3t-by-reference"
	// podPlainValue is a plain env value: in the pods, never in the settings annotation.
	podPlainValue = "plain-env-value"
)

// podBlock is a pod block with every knob; sa is "" (ctr creates an annotated
// ServiceAccount) or an existing ServiceAccount's name.
func podBlock(attr, sa string) string {
	identity := `service_account_annotations = { "eks.amazonaws.com/role-arn" = "arn:aws:iam::123456789012:role/ctr" }`
	if sa != "" {
		identity = fmt.Sprintf("service_account_name = %q", sa)
	}
	return fmt.Sprintf(`  %[1]s = {
    node_selector = { type = "kwok" }
    tolerations   = [{ key = "dedicated", operator = "Equal", value = "ctr", effect = "NoSchedule" }]
    affinity = { node = {
      required  = [{ match_expressions = [{ key = "kubernetes.io/os", operator = "In", values = ["linux"] }] }]
      preferred = [{ weight = 10, match_expressions = [{ key = "type", operator = "Exists" }] }]
    } }
    %[2]s
    labels              = { team = "ads" }
    annotations         = { "example.com/owner" = "ads" }
    priority_class_name = %[3]q
    env                 = { PLAIN = %[4]q }
    secret_env          = { S3_SECRET = { secret = "creds", key = "secret" } }
    env_from            = [{ secret = "creds", prefix = "CREDS_" }, { config_map = "settings" }]
    volumes = [
      { name = "dataset", persistent_volume_claim = { claim_name = "dataset", read_only = true } },
      { name = "creds", secret = { name = "creds" } },
      { name = "settings", config_map = { name = "settings" } },
      { name = "bucket", csi = { driver = "s3.csi.example.com", read_only = true, volume_attributes = { bucket = "ctr" }, node_publish_secret = "creds" } },
      { name = "scratch", empty_dir = { medium = "Memory", size_limit = "64Mi" } },
    ]
    volume_mounts = [
      { name = "dataset", mount_path = "/dataset", read_only = true },
      { name = "creds", mount_path = "/etc/creds" },
      { name = "settings", mount_path = "/etc/settings" },
      { name = "bucket", mount_path = "/mnt/bucket" },
      { name = "scratch", mount_path = "/scratch" },
    ]
    security_context = { run_as_user = 1234, run_as_group = 1234, fs_group = 2345, run_as_non_root = true, read_only_root_filesystem = true }
  }
`, attr, identity, podPriorityClass, podPlainValue)
}

func podKnobs(tpl corev1.PodTemplateSpec, sa string) error {
	s := tpl.Spec
	switch {
	case s.NodeSelector["type"] != "kwok":
		return fmt.Errorf("nodeSelector %v", s.NodeSelector)
	case !slices.Contains(s.Tolerations, corev1.Toleration{Key: "dedicated", Operator: "Equal", Value: "ctr", Effect: "NoSchedule"}):
		return fmt.Errorf("tolerations %v", s.Tolerations)
	case s.Affinity == nil || s.Affinity.NodeAffinity == nil || s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		len(s.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		s.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight != 10:
		return fmt.Errorf("affinity %+v", s.Affinity)
	case s.ServiceAccountName != sa:
		return fmt.Errorf("serviceAccountName %q, want %q", s.ServiceAccountName, sa)
	case tpl.Labels["team"] != "ads" || tpl.Annotations["example.com/owner"] != "ads":
		return fmt.Errorf("labels %v annotations %v", tpl.Labels, tpl.Annotations)
	case s.PriorityClassName != podPriorityClass:
		return fmt.Errorf("priorityClassName %q", s.PriorityClassName)
	case s.SecurityContext == nil || s.SecurityContext.RunAsUser == nil || *s.SecurityContext.RunAsUser != 1234 ||
		s.SecurityContext.FSGroup == nil || *s.SecurityContext.FSGroup != 2345 || s.SecurityContext.RunAsNonRoot == nil || !*s.SecurityContext.RunAsNonRoot:
		return fmt.Errorf("pod securityContext %+v", s.SecurityContext)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range s.Volumes {
		vols[v.Name] = v
	}
	if v := vols["dataset"]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "dataset" || !v.PersistentVolumeClaim.ReadOnly {
		return fmt.Errorf("dataset volume %+v", v)
	}
	if v := vols["creds"]; v.Secret == nil || v.Secret.SecretName != "creds" {
		return fmt.Errorf("creds volume %+v", v)
	}
	if v := vols["settings"]; v.ConfigMap == nil || v.ConfigMap.Name != "settings" {
		return fmt.Errorf("settings volume %+v", v)
	}
	if v := vols["bucket"]; v.CSI == nil || v.CSI.Driver != "s3.csi.example.com" || v.CSI.VolumeAttributes["bucket"] != "ctr" ||
		v.CSI.NodePublishSecretRef == nil || v.CSI.NodePublishSecretRef.Name != "creds" {
		return fmt.Errorf("bucket volume %+v", v)
	}
	if v := vols["scratch"]; v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory || v.EmptyDir.SizeLimit.String() != "64Mi" {
		return fmt.Errorf("scratch volume %+v", v)
	}
	for _, c := range s.Containers {
		if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
			return fmt.Errorf("container %s securityContext %+v", c.Name, c.SecurityContext)
		}
		env := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			env[e.Name] = e
		}
		if env["PLAIN"].Value != podPlainValue {
			return fmt.Errorf("container %s env PLAIN %+v", c.Name, env["PLAIN"])
		}
		if r := env["S3_SECRET"].ValueFrom; r == nil || r.SecretKeyRef == nil || r.SecretKeyRef.Name != "creds" || r.SecretKeyRef.Key != "secret" {
			return fmt.Errorf("container %s env S3_SECRET %+v", c.Name, env["S3_SECRET"])
		}
		if len(c.EnvFrom) != 2 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].Prefix != "CREDS_" || c.EnvFrom[1].ConfigMapRef == nil {
			return fmt.Errorf("container %s envFrom %+v", c.Name, c.EnvFrom)
		}
		for _, p := range []string{"/dataset", "/etc/creds", "/etc/settings", "/mnt/bucket", "/scratch"} {
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == p }) {
				return fmt.Errorf("container %s does not mount %s: %+v", c.Name, p, c.VolumeMounts)
			}
		}
	}
	return nil
}

// TestAccPod_TrainingJob: every knob on the training pods (with ctr's ServiceAccount,
// annotated) and on the file server (with the user's ServiceAccount), on the live Volcano
// Job and Deployment; no value in annotations or state; import.
func TestAccPod_TrainingJob(t *testing.T) {
	t.Parallel()
	k, ns, name := trainingJobTest(t)
	k.podPrerequisites(t, ns)
	owner := stack.Owner(stack.TrainingJobType, name)
	config := trainingJobConfig(ns, name, podBlock("pod", "")+"  file_server = {\n"+podBlock("pod", "mine")+"  }\n")
	k.run(t, ns, stack.TrainingJobType, name, append([]resource.TestStep{{
		Config: config,
		Check: resource.ComposeTestCheckFunc(
			k.checkPodKnobs(ns, owner, 3, func(key string) string {
				if strings.HasPrefix(key, "Deployment/") {
					return "mine"
				}
				return name
			}),
			k.checkServiceAccount(ns, name),
			k.checkNoValues(ns, owner, stack.TrainingJobKinds),
		),
	}}, importRoundTrip("ctr_training_job", ns+"/"+name, config, "last_condition", "tasks")...)...)
}

// TestAccPod_Cube: every knob on the cube servers and the transfer, with the ServiceAccount
// ctr creates for them; import.
func TestAccPod_Cube(t *testing.T) {
	t.Parallel()
	k, ns, name := cubeTest(t)
	k.podPrerequisites(t, ns)
	owner := stack.Owner(stack.CubeType, name)
	config := cubeConfig(ns, name, "  replicas = 1\n"+podBlock("pod", ""))
	k.run(t, ns, stack.CubeType, name, append([]resource.TestStep{{
		Config: config,
		Check: resource.ComposeTestCheckFunc(
			k.checkPodKnobs(ns, owner, 3, func(string) string { return name }),
			k.checkServiceAccount(ns, name),
			k.checkNoValues(ns, owner, stack.CubeKinds),
		),
	}}, importRoundTrip("ctr_cube", ns+"/"+name, config)...)...)
}

// TestAccPod_Serving: every knob on the serving pods, with the user's ServiceAccount, then
// with ctr's annotated one (the ServiceAccount created in place); import.
func TestAccPod_Serving(t *testing.T) {
	t.Parallel()
	k, ns, name := servingTest(t)
	k.podPrerequisites(t, ns)
	owner := stack.Owner(stack.ServingType, name)
	config := func(sa string) string {
		return fmt.Sprintf(`
resource "ctr_serving" "test" {
  name      = %[2]q
  namespace = %[1]q
  cube_conf = %[3]q
%[4]s
  timeouts  = { create = "3m", update = "3m", delete = "3m" }
}
`, ns, name, stack.Cube{Name: "c", Namespace: ns, DonefileURL: "http://x/base.txt"}.Defaulted().CubeConf(), podBlock("pod", sa))
	}
	k.run(t, ns, stack.ServingType, name, append([]resource.TestStep{
		{
			Config: config("mine"),
			Check: resource.ComposeTestCheckFunc(
				k.checkPodKnobs(ns, owner, 1, func(string) string { return "mine" }),
				k.checkNoValues(ns, owner, stack.ServingKinds),
			),
		},
		{
			Config: config(""),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction("ctr_serving.test", plancheck.ResourceActionUpdate),
			}},
			Check: resource.ComposeTestCheckFunc(
				k.checkPodKnobs(ns, owner, 1, func(string) string { return name }),
				k.checkServiceAccount(ns, name),
				k.checkNoValues(ns, owner, stack.ServingKinds),
			),
		},
	}, importRoundTrip("ctr_serving", ns+"/"+name, config(""))...)...)
}

func emptyDirVolume(name string) map[string]any {
	return map[string]any{"name": name, "empty_dir": map[string]any{}}
}

// servingPodBadInputs, cubePodBadInputs and trainingJobPodBadInputs are the pod blocks' bad
// values: see badInputs.
func servingPodBadInputs() []badInput {
	vol := emptyDirVolume
	serving := validConfigs["ctr_serving"]
	return []badInput{
		{"ctr's volume name", with(serving, "pod", map[string]any{"volumes": []any{vol("cube-conf")}}), "pod.volumes[0].name",
			`"cube-conf" is the name of a volume ctr mounts`},
		{"ctr's label", with(serving, "pod", map[string]any{"labels": map[string]any{"app.kubernetes.io/instance": "x"}}),
			`pod.labels["app.kubernetes.io/instance"]`, `is a label ctr sets on these pods`},
		{"service account annotations with a named service account", with(serving, "pod", map[string]any{"service_account_name": "mine",
			"service_account_annotations": map[string]any{"a": "b"}}), "pod.service_account_annotations", `go on the ServiceAccount ctr creates`},
		{"mount of no volume", with(serving, "pod", map[string]any{"volume_mounts": []any{map[string]any{"name": "x", "mount_path": "/x"}}}),
			"pod.volume_mounts[0].name", `is not one of this block's volumes`},
		{"env and pod.env", with(with(serving, "env", map[string]any{"A": "1"}), "pod", map[string]any{"env": map[string]any{"B": "1"}}),
			"env", `is replaced by pod.env`},
	}
}

func cubePodBadInputs() []badInput {
	vol := emptyDirVolume
	cube := validConfigs["ctr_cube"]
	return []badInput{
		{"mount inside ctr's", with(cube, "pod", map[string]any{"volumes": []any{vol("x")},
			"volume_mounts": []any{map[string]any{"name": "x", "mount_path": "/work/x"}}}), "pod.volume_mounts[0].mount_path", `where ctr mounts its volume "work"`},
		{"node_selector and pod.node_selector", with(with(cube, "node_selector", map[string]any{"a": "b"}), "pod",
			map[string]any{"node_selector": map[string]any{"a": "b"}}), "node_selector", `is replaced by pod.node_selector`},
	}
}

func trainingJobPodBadInputs() []badInput {
	vol := emptyDirVolume
	return []badInput{
		{"ctr's volume on the file server", map[string]any{"name": "j", "file_server": map[string]any{"pod": map[string]any{"volumes": []any{vol("model-output")}}}},
			"file_server.pod.volumes[0].name", `"model-output" is the name of a volume ctr mounts`},
		{"Volcano's label", map[string]any{"name": "j", "pod": map[string]any{"labels": map[string]any{"volcano.sh/job-name": "x"}}},
			`pod.labels["volcano.sh/job-name"]`, `which ctr and Volcano keep`},
	}
}
