package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// The cluster items of issue 15 §5, checked on the live objects in the API server:
// NetworkPolicies, hardened pods, security_context overrides, the cube's memory limit and
// the training file server's upload token.

// hardening is what one pod template must show.
type hardening struct {
	seccomp      corev1.SeccompProfileType
	runAsUser    *int64 // nil: not set (the image's user)
	addCaps      []corev1.Capability
	readOnlyRoot bool
}

func checkHardening(key string, tpl corev1.PodTemplateSpec, want hardening) error {
	ps := tpl.Spec.SecurityContext
	if ps == nil || ps.SeccompProfile == nil || ps.SeccompProfile.Type != want.seccomp {
		return fmt.Errorf("%s: pod seccomp profile %+v, want %s", key, ps, want.seccomp)
	}
	if (ps.RunAsUser == nil) != (want.runAsUser == nil) || (ps.RunAsUser != nil && *ps.RunAsUser != *want.runAsUser) {
		return fmt.Errorf("%s: runAsUser %v, want %v", key, ptrString(ps.RunAsUser), ptrString(want.runAsUser))
	}
	for _, c := range tpl.Spec.Containers {
		cs := c.SecurityContext
		if cs == nil || cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation || cs.Capabilities == nil ||
			!slices.Equal(cs.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			return fmt.Errorf("%s: container %s securityContext %+v: want allowPrivilegeEscalation false and every capability dropped", key, c.Name, cs)
		}
		if !slices.Equal(cs.Capabilities.Add, want.addCaps) {
			return fmt.Errorf("%s: container %s adds capabilities %v, want %v", key, c.Name, cs.Capabilities.Add, want.addCaps)
		}
		if ro := cs.ReadOnlyRootFilesystem != nil && *cs.ReadOnlyRootFilesystem; ro != want.readOnlyRoot {
			return fmt.Errorf("%s: container %s readOnlyRootFilesystem %v, want %v", key, c.Name, ro, want.readOnlyRoot)
		}
	}
	return nil
}

func ptrString(p *int64) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func cubeUser() *int64 { u := int64(65532); return &u }

func policyPorts(rule networkingv1.NetworkPolicyIngressRule) []int32 {
	var out []int32
	for _, p := range rule.Ports {
		out = append(out, p.Port.IntVal)
	}
	return out
}

// TestAccCube_NetworkPoliciesAndHardenedPods: a cube and the serving of its stack; the
// policies select the live pods; every pod is hardened with a memory limit on cube servers;
// a security_context override and network_policy.enabled = false are applied (the policies
// pruned); extra peers; import.
func TestAccCube_NetworkPoliciesAndHardenedPods(t *testing.T) {
	t.Parallel()
	k, ns, name := cubeTest(t)
	owner := stack.Owner(stack.CubeType, name)
	servingOwner := stack.Owner(stack.ServingType, "srv")
	configWith := func(extra, servingExtra string) string {
		return cubeConfig(ns, name, `  stack = "shop"
  replicas = 1
`+extra) + fmt.Sprintf(`
resource "ctr_serving" "test" {
  name      = "srv"
  namespace = %[1]q
  stack     = "shop"
  cube_conf = ctr_cube.test.cube_conf
%[2]s
  timeouts  = { create = "3m", update = "3m", delete = "3m" }
}
`, ns, servingExtra)
	}
	config := func(extra string) string { return configWith(extra, "") }
	defaults := func(string) hardening {
		return hardening{seccomp: corev1.SeccompProfileTypeRuntimeDefault, runAsUser: cubeUser(), readOnlyRoot: true}
	}
	servingDefaults := func(string) hardening { return hardening{seccomp: corev1.SeccompProfileTypeRuntimeDefault} }
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy: resource.ComposeTestCheckFunc(k.nothingLeftOf(ns, stack.CubeType, name),
			k.nothingLeftOf(ns, stack.ServingType, "srv")),
		Steps: []resource.TestStep{
			{
				Config: config(""),
				Check: resource.ComposeTestCheckFunc(
					k.checkCubePolicies(ns, name, "srv"),
					k.checkPods(ns, owner, 3, defaults),
					k.checkPods(ns, servingOwner, 1, servingDefaults),
					k.checkCubeMemory(ns, name+"-shard-0", stack.DefaultCubeMemory),
				),
			},
			{
				Config: config(`  resources = { requests = { memory = "2Gi" } }
  network_policy = { enabled = false }
  security_context = { run_as_user = 1000, seccomp_profile = "Unconfined", add_capabilities = ["NET_BIND_SERVICE"] }
`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(cubeAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("manifests"), knownvalue.MapSizeExact(9)), // Secret, the replicas' Service, 2 × (Service, StatefulSet), transfer claim, Service, Deployment: no NetworkPolicy
				},
				Check: resource.ComposeTestCheckFunc(
					k.checkNoPolicies(ns, owner),
					k.checkPods(ns, owner, 3, func(string) hardening {
						u := int64(1000)
						return hardening{seccomp: corev1.SeccompProfileTypeUnconfined, runAsUser: &u, readOnlyRoot: true, addCaps: []corev1.Capability{"NET_BIND_SERVICE"}}
					}),
					k.checkCubeMemory(ns, name+"-shard-0", "2Gi"),
				),
			},
			{
				Config: configWith(`  network_policy = { allow_from = [{ namespace_labels = { "kubernetes.io/metadata.name" = "monitoring" }, pod_labels = { app = "prometheus" } }] }
`, `  security_context = { add_capabilities = ["CHOWN", "FOWNER"], run_as_non_root = false }`),
				Check: resource.ComposeTestCheckFunc(
					k.checkCubePolicies(ns, name, "srv"),
					k.checkPods(ns, owner, 3, defaults),
					k.checkPods(ns, servingOwner, 1, func(string) hardening {
						return hardening{seccomp: corev1.SeccompProfileTypeRuntimeDefault, addCaps: []corev1.Capability{"CHOWN", "FOWNER"}}
					}),
					func(*terraform.State) error {
						srv, err := k.cs.NetworkingV1().NetworkPolicies(ns).Get(context.Background(), name+"-server", metav1.GetOptions{})
						if err != nil {
							return err
						}
						from := srv.Spec.Ingress[0].From
						last := from[len(from)-1]
						if last.NamespaceSelector == nil || last.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" ||
							last.PodSelector == nil || last.PodSelector.MatchLabels["app"] != "prometheus" {
							return fmt.Errorf("the extra peer is missing: %+v", from)
						}
						return nil
					},
				),
			},
			{
				ResourceName:            cubeAddr,
				ImportState:             true,
				ImportStateId:           ns + "/" + name,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				ResourceName:            servingAddr,
				ImportState:             true,
				ImportStateId:           ns + "/srv",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
		},
	})
}

// TestAccTrainingJob_UploadTokenAndHardenedPods: uploads with a generated token (a Secret,
// mounted into the file server, given to trainers by secretKeyRef, never in an annotation),
// hardened pods, a security_context override that replaces the job, import of the token,
// and the explicit opt-out of open uploads (the Secret pruned).
func TestAccTrainingJob_UploadTokenAndHardenedPods(t *testing.T) {
	t.Parallel()
	k := requireCluster(t)
	ns, name := k.namespace(t), jobName()
	owner := stack.Owner(stack.TrainingJobType, name)
	ctx := context.Background()
	var token string
	fileServer := func(key string) bool { return key == "Deployment/"+name+"-fileserver" }
	defaults := func(key string) hardening {
		if fileServer(key) {
			return hardening{seccomp: corev1.SeccompProfileTypeRuntimeDefault, runAsUser: cubeUser(), readOnlyRoot: true}
		}
		return hardening{seccomp: corev1.SeccompProfileTypeRuntimeDefault} // Paddle's images: root, writable root
	}
	checkToken := func(*terraform.State) error {
		secret, err := k.cs.CoreV1().Secrets(ns).Get(ctx, name+"-upload", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("upload token Secret: %w", err)
		}
		token = string(secret.Data["token"])
		if len(token) < 32 {
			return fmt.Errorf("upload token %q is too short to be generated", token)
		}
		tpls, err := k.podTemplates(ctx, ns, owner)
		if err != nil {
			return err
		}
		trainer := tpls["Job/"+name+"/trainer"].Spec.Containers[0]
		var ref *corev1.SecretKeySelector
		for _, e := range trainer.Env {
			if e.Name == stack.UploadTokenEnv {
				if e.Value != "" || e.ValueFrom == nil {
					return fmt.Errorf("trainer env %s is not a secret reference: %+v", e.Name, e)
				}
				ref = e.ValueFrom.SecretKeyRef
			}
		}
		if ref == nil || ref.Name != secret.Name || string(secret.Data[ref.Key]) != token {
			return fmt.Errorf("trainer env %s does not reference the upload token Secret: %+v", stack.UploadTokenEnv, ref)
		}
		fs := tpls["Deployment/"+name+"-fileserver"].Spec.Containers[0]
		if !slices.Contains(fs.Args, "--upload-token-file") || slices.Contains(fs.Args, "--upload-insecure") {
			return fmt.Errorf("file server args %v: want --upload-token-file, not --upload-insecure", fs.Args)
		}
		job, err := k.dyn.Resource(gvrOf(schema.GroupVersionKind{Group: "batch.volcano.sh", Version: "v1alpha1", Kind: "Job"})).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		dep, err := k.cs.AppsV1().Deployments(ns).Get(ctx, name+"-fileserver", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, ann := range []map[string]string{job.GetAnnotations(), dep.Annotations, dep.Spec.Template.Annotations} {
			for k, v := range ann {
				if strings.Contains(v, token) {
					return fmt.Errorf("annotation %s holds the upload token", k)
				}
			}
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             k.nothingLeftOf(ns, stack.TrainingJobType, name),
		Steps: []resource.TestStep{
			{
				Config: trainingJobConfig(ns, name, `  file_server = { upload = true }`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectSensitiveValue(jobAddr, tfjsonpath.New("upload_token")),
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("manifests"), knownvalue.MapSizeExact(8)),
				},
				Check: resource.ComposeTestCheckFunc(checkToken, k.checkPods(ns, owner, 3, defaults),
					resource.TestCheckResourceAttrWith(jobAddr, "upload_token", func(v string) error {
						if v != token {
							return fmt.Errorf("state's upload_token is not the Secret's")
						}
						return nil
					})),
			},
			{
				// The training pods' securityContext is part of the Volcano job's tasks: replaced.
				Config: trainingJobConfig(ns, name, `  file_server = { upload = true, security_context = { read_only_root_filesystem = false } }
  security_context = { run_as_user = 1000, add_capabilities = ["CHOWN"] }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionDestroyBeforeCreate),
				}},
				Check: resource.ComposeTestCheckFunc(checkToken, k.checkPods(ns, owner, 3, func(key string) hardening {
					if fileServer(key) {
						return hardening{seccomp: corev1.SeccompProfileTypeRuntimeDefault, runAsUser: cubeUser()}
					}
					u := int64(1000)
					return hardening{seccomp: corev1.SeccompProfileTypeRuntimeDefault, runAsUser: &u, addCaps: []corev1.Capability{"CHOWN"}}
				})),
			},
			{
				ResourceName:            jobAddr,
				ImportState:             true,
				ImportStateId:           ns + "/" + name,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts", "last_condition", "tasks"}, // live: Volcano stamps the pod group's condition again; pods move on
			},
			{
				// Open uploads, explicitly: no token, no Secret; the trainers lose the env, so the job is replaced.
				Config: trainingJobConfig(ns, name, `  file_server = { upload = true, upload_insecure = true }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionDestroyBeforeCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("upload_token"), knownvalue.Null()),
				},
				Check: func(*terraform.State) error {
					if _, err := k.cs.CoreV1().Secrets(ns).Get(ctx, name+"-upload", metav1.GetOptions{}); err == nil {
						return fmt.Errorf("the upload token Secret was not removed")
					}
					dep, err := k.cs.AppsV1().Deployments(ns).Get(ctx, name+"-fileserver", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--upload-insecure") {
						return fmt.Errorf("file server args %v: want --upload-insecure", dep.Spec.Template.Spec.Containers[0].Args)
					}
					return nil
				},
			},
		},
	})
}

// TestVolcanoTasksDiffer: a job whose tasks a provider version renders differently (here: one
// without the hardened securityContext, as an earlier version rendered it) is replaced; a
// change outside the tasks (the gang size) is not a reason.
func TestVolcanoTasksDiffer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	manifests := func(j stack.TrainingJob, strip bool) types.Map {
		set, err := stack.RenderTrainingJob(j)
		if err != nil {
			t.Fatal(err)
		}
		job := set.Find(stack.VolcanoJobKey(j.Name))
		if strip {
			tasks, _, _ := unstructured.NestedSlice(job.Object, "spec", "tasks")
			for _, task := range tasks {
				unstructured.RemoveNestedField(task.(map[string]any), "template", "spec", "securityContext")
			}
			if err := unstructured.SetNestedSlice(job.Object, tasks, "spec", "tasks"); err != nil {
				t.Fatal(err)
			}
		}
		m, err := set.Manifests()
		if err != nil {
			t.Fatal(err)
		}
		v, d := types.MapValueFrom(ctx, types.StringType, m)
		if d.HasError() {
			t.Fatal(d)
		}
		return v
	}
	key := stack.VolcanoJobKey("j")
	now := manifests(stack.TrainingJob{Name: "j", Namespace: "n"}, false)
	if !volcanoTasksDiffer(manifests(stack.TrainingJob{Name: "j", Namespace: "n"}, true), now, key) {
		t.Error("pods rendered without the hardened securityContext must count as changed tasks")
	}
	if volcanoTasksDiffer(now, manifests(stack.TrainingJob{Name: "j", Namespace: "n", MinAvailable: 1}, false), key) {
		t.Error("min_available changes in place, not in the tasks")
	}
	if volcanoTasksDiffer(types.MapUnknown(types.StringType), now, key) || volcanoTasksDiffer(now, types.MapNull(types.StringType), key) {
		t.Error("unknown or missing manifests are no reason to replace")
	}
}
