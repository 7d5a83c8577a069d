package provider

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/donefile"
	"github.com/elasticctr/terraform-provider-ctr/cube/pipeline"
	"github.com/elasticctr/terraform-provider-ctr/cube/seqfile"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/internal/testenv"
)

// End-to-end tests on the local cluster's real node: the provider's objects, unchanged, run
// in pods of the project's image (the namespace's annotations place every pod there), and
// nothing in between is simulated.

// realNode returns the clients, a fresh namespace whose pods all run on the real node, and
// the name of the project's image imported there. It skips where the environment has no real
// node (make test starts one).
func requireRealNode(t *testing.T) (*kubeClients, string, string) {
	t.Helper()
	k := requireCluster(t)
	env, err := testenv.Load(filepath.Dir(os.Getenv("KUBECONFIG")))
	if err != nil || !env.Node {
		t.Skip("the environment has no real node: make test starts one (testenv up -node)")
	}
	image := env.NodeImage(stack.CubeImageRepository)
	if image == "" {
		t.Fatalf("no %s image imported into the real node (images: %v): testenv up -node -image dist/image/cube-image.tar", stack.CubeImageRepository, env.NodeImages)
	}
	ns := k.namespace(t)
	nsObj, err := k.cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Annotations = testenv.RealNodeNamespace()
	if _, err := k.cs.CoreV1().Namespaces().Update(context.Background(), nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return k, ns, image
}

// e2eModelKeys is how many keys the trainer stand-in writes; lookups check them all.
const e2eModelKeys = 20000

// e2eStack is a training job whose trainer is the stand-in (`cube model`, generation gen,
// donefile id id) writing into the model volume, and a cube of 2 shards × 2 replicas that
// follows its donefile.
func e2eStack(ns, image string, id, gen int, cubeExtra ...string) string {
	return e2eStackShards(ns, image, id, gen, 2, cubeExtra...)
}

func e2eStackShards(ns, image string, id, gen, shards int, cubeExtra ...string) string {
	return e2eTraining(ns, image, id, gen, "") + e2eCube(ns, image, shards, cubeExtra...)
}

// e2eCube is the cube of e2eStack: shards × 2 replicas following the training job's donefile.
func e2eCube(ns, image string, shards int, extra ...string) string {
	return fmt.Sprintf(`
resource "ctr_cube" "cube" {
  name         = "e2e-cube"
  namespace    = %[1]q
  image        = %[2]q
  donefile_url = ctr_training_job.train.donefile_url
  replicas     = 2
  timeouts     = { create = "5m", update = "5m", delete = "3m" }
%[3]s
}
`, ns, image, strings.Join(append([]string{fmt.Sprintf("  shards       = %d", shards)}, extra...), "\n"))
}

// e2eTraining is the training job of e2eStack alone, with extra attributes.
func e2eTraining(ns, image string, id, gen int, extra string) string {
	return e2eTrainingRunning(ns, image, fmt.Sprintf(`["/cube", "model", "--out", "/data", "--keys", "%d", "--id", "%d", "--gen", "%d"]`, e2eModelKeys, id, gen), extra)
}

// e2eTrainingRunning is the training job of the end-to-end tests, its one worker running
// command (HCL) in our image, with extra attributes.
func e2eTrainingRunning(ns, image, command, extra string) string {
	return fmt.Sprintf(`
resource "ctr_training_job" "train" {
  name              = "e2e"
  namespace         = %[1]q
  mode              = "collective"
  image             = %[2]q
  image_pull_policy = "IfNotPresent"
  command           = %[3]s
  worker            = { replicas = 1 }
  model_output      = { size = "1Gi", mount_path = "/data", donefile_path = "donefile/base.txt" }
  file_server       = { image = %[2]q }
  timeouts          = { create = "5m", update = "5m", delete = "3m" }
%[4]s
}
`, ns, image, command, extra)
}

// TestAccRealNode_TrainingServesModel: the training job alone. Its task (the trainer
// stand-in) runs to completion, which the job's phase reports; and the model it wrote is
// served over the file server's Service at the exported donefile_url: the donefile's line, a
// directory listing of its input (as the transfer crawls it), and every record of every
// SequenceFile listed there with the value the trainer wrote.
func TestAccRealNode_TrainingServesModel(t *testing.T) {
	k, ns, image := requireRealNode(t)
	const id, gen = 500, 3
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             k.checkNothingOwnedOf(ns, stack.Owner(stack.TrainingJobType, "e2e"), stack.TrainingJobKinds),
		Steps: []resource.TestStep{{
			Config: e2eTraining(ns, image, id, gen, `  wait              = "completed"`),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("ctr_training_job.train", tfjsonpath.New("phase"), knownvalue.StringExact("Completed")),
			},
			Check: k.servesModel(ns, strconv.Itoa(id), gen),
		}},
	})
}

// servesModel fetches, through the API server's service proxy, the donefile at the state's
// donefile_url, then its line id's input directory listing and every file listed, and checks
// the files hold e2eModelKeys records of generation gen.
func (k *kubeClients) servesModel(ns, id string, gen byte) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		donefileURL, err := url.Parse(s.RootModule().Resources["ctr_training_job.train"].Primary.Attributes["donefile_url"])
		if err != nil {
			return err
		}
		get := func(u *url.URL) ([]byte, error) { return k.fileServerGet(s, ns, u.Path) }
		b, err := get(donefileURL)
		if err != nil {
			return err
		}
		entries, warns := donefile.Parse(b)
		if len(entries) != 1 || entries[0].ID != id || len(warns) > 0 {
			return fmt.Errorf("donefile %s: %q, want one line of id %s (warnings: %v)", donefileURL, b, id, warns)
		}
		input := donefileURL.ResolveReference(&url.URL{Path: strings.TrimSuffix(entries[0].Input, "/") + "/"})
		listing, err := get(input)
		if err != nil {
			return err
		}
		dir := filepath.Join(os.TempDir(), "ctr-e2e-model-"+ns)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		var files []string
		for _, m := range regexp.MustCompile(`href="([^"?/]+)"`).FindAllStringSubmatch(string(listing), -1) {
			if strings.HasPrefix(m[1], ".") || strings.HasPrefix(m[1], "_") {
				continue
			}
			b, err := get(input.ResolveReference(&url.URL{Path: m[1]}))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, m[1]), b, 0o644); err != nil {
				return err
			}
			files = append(files, m[1])
		}
		records, wrong := 0, 0
		err = seqfile.ReadAll(dir, seqfile.Options{}, func(key uint64, value []byte) error {
			records++
			if !bytes.Equal(value, pipeline.Value(key, gen, pipeline.DefaultValueSize)) {
				wrong++
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("model %s (files %v): %w", input, files, err)
		}
		if records != e2eModelKeys || wrong > 0 {
			return fmt.Errorf("model %s (files %v): %d records, %d with a wrong value; want %d of generation %d", input, files, records, wrong, e2eModelKeys, gen)
		}
		return nil
	}
}

// TestAccRealNode_TrainingToLookup: the trainer stand-in writes a model into the training
// job's volume; its file server serves it over its Service; the cube's transfer picks the
// donefile line up, builds, distributes and switches 2 shards × 2 replicas; served_version
// becomes that version; and a Job on the node looks every key up through the exported
// cube_conf mounted from a ConfigMap, as Paddle Serving would read it.
func TestAccRealNode_TrainingToLookup(t *testing.T) {
	k, ns, image := requireRealNode(t)
	const id, gen = 1000, 1
	var version string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy: resource.ComposeTestCheckFunc(
			k.checkNothingOwnedOf(ns, stack.Owner(stack.TrainingJobType, "e2e"), stack.TrainingJobKinds),
			k.checkNothingOwnedOf(ns, stack.Owner(stack.CubeType, "e2e-cube"), stack.CubeKinds)),
		Steps: []resource.TestStep{
			{
				Config: e2eStack(ns, image, id, gen),
				Check: resource.ComposeTestCheckFunc(
					k.waitServed(ns, "e2e-cube", strconv.Itoa(id), 4*time.Minute, &version),
					k.logPodTimes(t, ns, stack.LabelInstance+"=e2e-cube")),
			},
			{
				// A refresh reads what the replicas serve: that version, on both replicas of
				// both shards.
				Config: e2eStack(ns, image, id, gen),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ctr_cube.cube", tfjsonpath.New("serving_replicas"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.Int64Exact(2), knownvalue.Int64Exact(2)})),
				},
				Check: resource.ComposeTestCheckFunc(stateServes(&version), k.lookupJob(t, ns, image, "lookup", gen)),
			},
		},
	})
}

// logPodTimes logs, for the pods the selector selects, how long each took from creation to
// its containers' start and to Ready (a cube server is Ready once it serves a model).
func (k *kubeClients) logPodTimes(t *testing.T, ns, selector string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		pods, err := k.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			var started, ready time.Duration
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.ContainersReady && c.Status == corev1.ConditionTrue {
					ready = c.LastTransitionTime.Sub(p.CreationTimestamp.Time)
				}
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running != nil {
					started = cs.State.Running.StartedAt.Sub(p.CreationTimestamp.Time)
				}
			}
			t.Logf("pod %s: created -> container running %s, -> Ready %s", p.Name, started, ready)
		}
		return nil
	}
}

// TestAccRealNode_RolloutUnderLookups: a second model version rolls out while a Job on the
// node looks keys up through the exported cube_conf the whole time: zero failed lookups and
// no response mixing versions. The new version comes as a trainer does it: the training job
// (command changed) runs again and writes version 2000 of generation 2.
func TestAccRealNode_RolloutUnderLookups(t *testing.T) {
	k, ns, image := requireRealNode(t)
	var v1, v2 string
	const load = "150s"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		Steps: []resource.TestStep{
			{
				Config: e2eStack(ns, image, 1000, 1),
				Check: resource.ComposeTestCheckFunc(
					k.waitServed(ns, "e2e-cube", "1000", 4*time.Minute, &v1),
					func(s *terraform.State) error {
						return k.startSeekJob(t, s, ns, image, "load", 0, "--first", strconv.Itoa(e2eModelKeys), "--for", load)
					}),
			},
			{
				Config: e2eStack(ns, image, 2000, 2),
				Check: resource.ComposeTestCheckFunc(
					k.waitServed(ns, "e2e-cube", "2000", 4*time.Minute, &v2),
					func(*terraform.State) error {
						if k.jobFinished(ns, "load") {
							return fmt.Errorf("the lookup job ended before version 2000 served, so it did not look up during the whole rollout "+
								"(if it succeeded, make --for longer than %s); its log: %s", load, k.jobLogs(context.Background(), ns, "load"))
						}
						logs, err := k.waitJob(ns, "load", 4*time.Minute)
						if err != nil {
							return err
						}
						t.Logf("lookups during the rollout of %s -> %s: %s", v1, v2, lastLine(logs))
						return nil
					},
					k.lookupJob(t, ns, image, "lookup", 2)),
			},
		},
	})
}

// TestAccRealNode_Reshard: shards 2 -> 3 -> 2. Growing, the transfer rebuilds the last model
// for 3 shards and every key answers through the new cube_conf; shrinking, the 2-shard layout
// serves before the removed shard's StatefulSet goes, and lookups through the 2-shard
// cube_conf find every key again.
func TestAccRealNode_Reshard(t *testing.T) {
	k, ns, image := requireRealNode(t)
	const id, gen = 1000, 1
	var v2, v3, v2again string
	update := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("ctr_cube.cube", plancheck.ResourceActionUpdate),
		plancheck.ExpectResourceAction("ctr_training_job.train", plancheck.ResourceActionNoop)}}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		Steps: []resource.TestStep{
			{
				Config: e2eStackShards(ns, image, id, gen, 2),
				Check:  k.waitServedShards(ns, "e2e-cube", strconv.Itoa(id), 2, 4*time.Minute, &v2, ""),
			},
			{
				Config:           e2eStackShards(ns, image, id, gen, 3),
				ConfigPlanChecks: update,
				Check: resource.ComposeTestCheckFunc(
					k.waitServedShards(ns, "e2e-cube", strconv.Itoa(id), 3, 4*time.Minute, &v3, v2),
					k.lookupJob(t, ns, image, "lookup-3", gen)),
			},
			{
				Config:           e2eStackShards(ns, image, id, gen, 2),
				ConfigPlanChecks: update,
				Check: resource.ComposeTestCheckFunc(
					// The apply returns only once the 2-shard layout serves; shard 2 is gone.
					k.servesNow(ns, "e2e-cube", strconv.Itoa(id), 2, &v2again, v3),
					k.statefulSetGone(ns, "e2e-cube-shard-2"),
					k.lookupJob(t, ns, image, "lookup-2", gen)),
			},
		},
	})
}

func (k *kubeClients) statefulSetGone(ns, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, err := k.cs.AppsV1().StatefulSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			return fmt.Errorf("StatefulSet %s/%s still exists after the apply", ns, name)
		}
		return nil
	}
}

// servesNow checks, without waiting, that the cube serves a build of donefile id for shards
// shards other than not (the apply waited for it).
func (k *kubeClients) servesNow(ns, cube, id string, shards int, version *string, not string) resource.TestCheckFunc {
	return k.waitServedShards(ns, cube, id, shards, time.Second, version, not)
}

// TestAccRealNode_ReplicaComesBack: a cube pod deleted (its disk is an emptyDir, so it comes
// back empty) serves the current version again without a new model: the transfer heals it.
func TestAccRealNode_ReplicaComesBack(t *testing.T) {
	k, ns, image := requireRealNode(t)
	const id, gen = 1000, 1
	var version string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		Steps: []resource.TestStep{{
			Config: e2eStack(ns, image, id, gen),
			Check: resource.ComposeTestCheckFunc(
				k.waitServed(ns, "e2e-cube", strconv.Itoa(id), 4*time.Minute, &version),
				k.deletePodAndWaitServing(t, ns, "e2e-cube", "e2e-cube-shard-0-0", &version, 3*time.Minute),
				k.lookupJob(t, ns, image, "lookup", gen)),
		}},
	})
}

// TestAccRealNode_DestroyLeavesNothing: with storage set, every shard replica has a claim;
// destroy removes everything the resources own, and those claims too.
func TestAccRealNode_DestroyLeavesNothing(t *testing.T) {
	k, ns, image := requireRealNode(t)
	const id, gen = 1000, 1
	var version string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy: resource.ComposeTestCheckFunc(
			k.checkNothingOwnedOf(ns, stack.Owner(stack.TrainingJobType, "e2e"), stack.TrainingJobKinds),
			k.checkNothingOwnedOf(ns, stack.Owner(stack.CubeType, "e2e-cube"), stack.CubeKinds),
			k.checkNoClaims(ns)),
		Steps: []resource.TestStep{{
			// The model output goes too only when not retained (it is by default; see
			// TestAccTrainingJob_ModelOutputOutlivesTheJob).
			Config: strings.Replace(e2eStack(ns, image, id, gen, `  storage      = { size = "1Gi" }`),
				`donefile_path = "donefile/base.txt" }`, `donefile_path = "donefile/base.txt", retain = false }`, 1),
			Check: resource.ComposeTestCheckFunc(
				k.waitServed(ns, "e2e-cube", strconv.Itoa(id), 4*time.Minute, &version),
				k.countClaims(ns, 1+1+2*2)), // model output, transfer, 2 shards x 2 replicas
		}},
	})
}

func (k *kubeClients) countClaims(ns string, want int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		list, err := k.cs.CoreV1().PersistentVolumeClaims(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) != want {
			var names []string
			for _, c := range list.Items {
				names = append(names, c.Name)
			}
			return fmt.Errorf("%d claims in %s (%s), want %d", len(list.Items), ns, strings.Join(names, ", "), want)
		}
		return nil
	}
}

func (k *kubeClients) checkNoClaims(ns string) resource.TestCheckFunc { return k.countClaims(ns, 0) }

// deletePodAndWaitServing deletes one cube pod and waits until its shard's replicas all serve
// version again (the StatefulSet brings the pod back empty; the transfer's heal pass fills it).
func (k *kubeClients) deletePodAndWaitServing(t *testing.T, ns, cube, pod string, version *string, timeout time.Duration) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		old, err := k.cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		start := time.Now()
		if err := k.cs.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{}); err != nil {
			return err
		}
		var last string
		err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
			p, err := k.cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			if err != nil || p.UID == old.UID {
				return false, nil // not yet re-created
			}
			st, body, err := k.transferStatus(ctx, ns, cube)
			if err != nil {
				return false, nil
			}
			last = body
			if st.ServedVersion != *version {
				return false, nil
			}
			for _, sh := range st.Shards {
				if sh.Serving != len(sh.Replicas) {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("pod %s/%s deleted: its shard did not serve %s on every replica again within %s: %w; last status: %s", ns, pod, *version, timeout, err, last)
		}
		t.Logf("pod %s deleted: every replica serves %s again after %s", pod, *version, time.Since(start).Round(100*time.Millisecond))
		return nil
	}
}

// waitServed waits (bounded) until the replicas of every shard of the cube serve the version
// the transfer built from donefile id, and records that version's name in *version.
func (k *kubeClients) waitServed(ns, cube, id string, timeout time.Duration, version *string) resource.TestCheckFunc {
	return k.waitServedShards(ns, cube, id, 0, timeout, version, "")
}

// waitServedShards is waitServed for a build with shards shards (0: any) other than the
// version not (a re-shard rebuilds the same donefile id under a new version name).
func (k *kubeClients) waitServedShards(ns, cube, id string, shards int, timeout time.Duration, version *string, not string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		var last string
		err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
			st, body, err := k.transferStatus(ctx, ns, cube)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			last = body
			if shards > 0 && len(st.Shards) != shards {
				return false, nil
			}
			for _, r := range st.History {
				if r.ID == id && r.Result == "served" && st.ServedVersion == r.Version && r.Version != not {
					*version = r.Version
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("cube %s/%s did not serve donefile id %s within %s: %w; last status: %s", ns, cube, id, timeout, err, last)
		}
		return nil
	}
}

// transferStatus reads the cube's transfer status through the API server's service proxy:
// the decoded status and its raw body (for failure messages).
func (k *kubeClients) transferStatus(ctx context.Context, ns, cube string) (api.Status, string, error) {
	c := stack.Cube{Name: cube, Namespace: ns}.Defaulted()
	body, err := k.cs.CoreV1().Services(ns).ProxyGet("http", c.TransferService(), strconv.Itoa(int(c.TransferPort)), stack.TransferStatusPath, nil).DoRaw(ctx)
	if err != nil {
		return api.Status{}, "", err
	}
	st, err := stack.DecodeTransferStatus(body)
	if err != nil {
		return api.Status{}, string(body), fmt.Errorf("transfer status of cube %s/%s: %w", ns, cube, err)
	}
	return st, string(body), nil
}

// stateServes checks the state's served_version is version (what the replicas report).
func stateServes(version *string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		got := s.RootModule().Resources["ctr_cube.cube"].Primary.Attributes["served_version"]
		if got != *version || got == "" {
			return fmt.Errorf("ctr_cube.cube served_version = %q, want %q", got, *version)
		}
		return nil
	}
}

// lookupJob runs `cube seek --conf` in a Job on the real node with the state's cube_conf
// mounted from a ConfigMap and checks every key's value is generation gen's.
func (k *kubeClients) lookupJob(t *testing.T, ns, image, name string, gen int) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		// A shard Service that just got its first ready pods may not be in the cluster DNS yet
		// (CoreDNS answers SERVFAIL until its endpoint watch catches up): seek waits up to
		// --ready-within for every name to resolve and every shard to answer, and the Job
		// retries twice. A wrong value fails every attempt.
		if err := k.startSeekJob(t, s, ns, image, name, 2, "--first", strconv.Itoa(e2eModelKeys), "--check", strconv.Itoa(gen), "--ready-within", "1m"); err != nil {
			return err
		}
		logs, err := k.waitJob(ns, name, 3*time.Minute)
		if err != nil {
			return fmt.Errorf("%w: not every value is generation %d", err, gen)
		}
		t.Logf("lookup job: %s", lastLine(logs))
		return nil
	}
}

// startSeekJob starts `cube seek --conf /conf/cube.conf ARGS...` in a Job, with the state's
// cube_conf mounted from a ConfigMap, exactly what Paddle Serving would read.
func (k *kubeClients) startSeekJob(t *testing.T, s *terraform.State, ns, image, name string, retries int32, args ...string) error {
	ctx := context.Background()
	conf := s.RootModule().Resources["ctr_cube.cube"].Primary.Attributes["cube_conf"]
	if conf == "" {
		return fmt.Errorf("ctr_cube.cube exports no cube_conf")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-conf", Namespace: ns}, Data: map[string]string{"cube.conf": conf}}
	if _, err := k.cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return err
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To(retries),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "seek", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
					Args:         append([]string{"seek", "--conf", "/conf/cube.conf", "--timeout", "30s"}, args...),
					VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/conf"}},
				}},
				Volumes: []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}}},
			}},
		},
	}
	if _, err := k.cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return err
	}
	t.Cleanup(func() {
		bg := metav1.DeletePropagationBackground
		_ = k.cs.BatchV1().Jobs(ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &bg})
	})
	return nil
}

// jobFinished says whether the Job has ended.
func (k *kubeClients) jobFinished(ns, name string) bool {
	j, err := k.cs.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	return err == nil && (j.Status.Succeeded > 0 || j.Status.Failed > 0)
}

// waitJob waits for the Job to end and returns its pod's log; an error if it failed.
func (k *kubeClients) waitJob(ns, name string, timeout time.Duration) (string, error) {
	ctx := context.Background()
	var done *batchv1.Job
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		j, err := k.cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		done = j
		return j.Status.Succeeded > 0 || j.Status.Failed > 0, nil
	})
	logs := k.jobLogs(ctx, ns, name)
	if err != nil {
		return logs, fmt.Errorf("job %s/%s did not finish: %w\n%s", ns, name, err, logs)
	}
	if done.Status.Succeeded == 0 {
		return logs, fmt.Errorf("job %s/%s failed\n%s", ns, name, logs)
	}
	return logs, nil
}

func (k *kubeClients) jobLogs(ctx context.Context, ns, job string) string {
	pods, err := k.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil || len(pods.Items) == 0 {
		return "(no pod)"
	}
	pod := pods.Items[0].Name // the one that succeeded, if any (a Job may retry)
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded {
			pod = p.Name
		}
	}
	data, err := k.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return string(data)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
