package provider

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/elasticctr/terraform-provider-ctr/cube/api"
	"github.com/elasticctr/terraform-provider-ctr/cube/launch"
	"github.com/elasticctr/terraform-provider-ctr/cube/paddle/infer"
	"github.com/elasticctr/terraform-provider-ctr/cube/samples"
	"github.com/elasticctr/terraform-provider-ctr/cube/servingconf"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest"
	"github.com/elasticctr/terraform-provider-ctr/internal/cubetest/ctrmodel"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// e2eSparseDim is the embedding table of the serving e2e: keys 0..N-1, every Criteo
// feature's key (hash % N) among them.
const e2eSparseDim = 100003

// e2eDense is how the real CTR model reaches the trainer stand-in's pod: ConfigMaps (each
// under 1 MiB) made from Paddle's files, each file mounted at /dense/<file>. The click bias
// comes from the ConfigMap of the version: another dense model per version.
type e2eDense struct {
	files map[string]string // file -> ConfigMap
}

// e2eDenseConfigMaps creates the ConfigMaps of two dense versions and returns each
// version's model, loaded here to compute what serving must answer.
func (k *kubeClients) e2eDenseConfigMaps(t *testing.T, ns string) (e2eDense, []*infer.Model) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	var models []*infer.Model
	for v := range 2 {
		d := filepath.Join(dir, strconv.Itoa(v))
		ctrmodel.ServingModel(t, d)
		ctrmodel.ShiftClickBias(t, d, float32(v))
		m, err := infer.Load(d)
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, m)
	}
	d := e2eDense{files: map[string]string{}}
	groups := map[string][]string{
		"dense-a": {"__model__", "fc_0.w_0", "fc_0.b_0", "fc_1.b_0", "fc_2.b_0", "fc_3.w_0", servingconf.ModelConfFile},
		"dense-b": {"fc_1.w_0"}, "dense-c": {"fc_2.w_0"}, "dense-bias-0": {"fc_3.b_0"}, "dense-bias-1": {"fc_3.b_0"},
	}
	for name, files := range groups {
		src := filepath.Join(dir, "0")
		if name == "dense-bias-1" {
			src = filepath.Join(dir, "1")
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, BinaryData: map[string][]byte{}}
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			cm.BinaryData[f] = b
			if !strings.HasPrefix(name, "dense-bias") {
				d.files[f] = name
			}
		}
		if _, err := k.cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return d, models
}

// pod is the trainer's pod block: the dense files of version v at /dense.
func (d e2eDense) pod(v int) string {
	files := slices.Sorted(maps.Keys(d.files))
	cms := map[string]bool{"dense-bias-" + strconv.Itoa(v): true}
	var mounts []string
	for _, f := range files {
		cms[d.files[f]] = true
		mounts = append(mounts, fmt.Sprintf(`{ name = %q, mount_path = "/dense/%s", sub_path = %q, read_only = true }`, d.files[f], f, f))
	}
	mounts = append(mounts, fmt.Sprintf(`{ name = "dense-bias-%d", mount_path = "/dense/fc_3.b_0", sub_path = "fc_3.b_0", read_only = true }`, v))
	var vols []string
	for _, cm := range slices.Sorted(maps.Keys(cms)) {
		vols = append(vols, fmt.Sprintf(`{ name = %q, config_map = { name = %q } }`, cm, cm))
	}
	return fmt.Sprintf("  pod = {\n    volumes = [%s]\n    volume_mounts = [%s]\n  }\n", strings.Join(vols, ", "), strings.Join(mounts, ", "))
}

// e2eServingStack is the whole stack: the trainer stand-in writing version id (embeddings of
// generation v+1 for every key, and dense version v as serving/<id>.tar.gz), the cube, and
// Paddle Serving following the cube (our launcher, with the stand-in of Paddle's server from
// the same image).
func e2eServingStack(ns, image string, d e2eDense, v int) string {
	return e2eServingStackOf(ns, image, d, v, true)
}

// e2eServingStackOf is e2eServingStack whose version may come without a serving model.
func e2eServingStackOf(ns, image string, d e2eDense, v int, withServing bool) string {
	id := strconv.Itoa(1000 * (v + 1))
	serving, pod := `, "--serving-model", "/dense"`, d.pod(min(v, 1))
	if !withServing {
		serving, pod = "", ""
	}
	command := fmt.Sprintf(`["/cube", "model", "--out", "/data", "--keys", "%d", "--value-size", "%d", "--embedding", "--id", "%s", "--gen", "%d"%s]`,
		e2eSparseDim, 4*ctrmodel.Width, id, v+1, serving)
	return e2eTrainingRunning(ns, image, command, pod) + e2eCube(ns, image, 2) + fmt.Sprintf(`
resource "ctr_serving" "serving" {
  name              = "e2e-serving"
  namespace         = %[1]q
  stack             = "e2e-cube"
  image             = %[2]q
  launcher_image    = %[2]q
  cube_conf         = ctr_cube.cube.cube_conf
  cube_transfer_url = ctr_cube.cube.transfer_url
  model_url         = "${ctr_training_job.train.file_server_url}/data/serving/%[3]s.tar.gz"
  pod = {
    env = { SERVING_BIN = "%[4]s/%[5]s", SERVING_STANDIN_LISTEN_HOST = "" }
  }
  timeouts = { create = "5m", update = "5m", delete = "3m" }
}
`, ns, image, api.ModelIDPlaceholder, stack.ServingLauncherDir, servingconf.StandinName)
}

// TestAccRealNode/ServingPredicts: the whole stack in one apply, on the real node. The
// trainer stand-in publishes version 1000 (embeddings for every key, and the real CTR model's
// dense half as serving/1000.tar.gz); the cube rolls it out; the serving pods (our launcher,
// copied in by the init container, running the stand-in of Paddle's server from our image)
// wait for it, fetch that version's dense model and answer: a Job sends Serving's 1,000
// Criteo demo lines through the serving Service with `cube predict`, and every probability is
// what this process computes with the same model and embeddings. Then the trainer publishes
// version 2000 (new embeddings, new dense weights) while a Job predicts without pause: the
// dense model is never ahead of the embeddings, answers combine versions for no longer than
// the bound, ctr_serving's model_id follows, and no serving pod restarts. Last, version 3000
// comes without a serving model: the pods keep 2000's dense model, and a plan says that
// serving is behind the cube.
func realNodeServingPredicts(t *testing.T) {
	k, ns, image := requireRealNode(t)
	rec := newDiagRecorder(t)
	dense, models := k.e2eDenseConfigMaps(t, ns)
	path := filepath.Join(cubetest.PaddleData(t, "serving-ctr-model"), "criteo_test_data.txt")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []samples.Sample
	if err := samples.Each(samples.Criteo{}, strings.NewReader(string(data)), e2eSparseDim, func(_ int, s samples.Sample) error {
		lines = append(lines, s)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	k.predictInput(t, ns, map[string]string{"lines.txt": string(data), "one.txt": first + "\n"})
	var pods map[string]int32
	const load = "150s"
	// Terraform holds only the RBAC guide's ClusterRole in ns: the waits, the live reads of
	// what serving and the cube serve (through the API server's proxy) and destroy need no more.
	k.testE2EAs(t, ns, k.workloadsKubeconfig(t, ns), resource.TestCase{
		ProtoV6ProviderFactories: rec.factories(),
		CheckDestroy:             k.nothingLeftOf(ns, stack.ServingType, "e2e-serving"),
		Steps: []resource.TestStep{
			{
				Config: e2eServingStack(ns, image, dense, 0),
				Check: resource.ComposeTestCheckFunc(
					func(*terraform.State) error {
						out, err := k.predictJob(ns, image, "predict", 3*time.Minute, "lines.txt")
						if err != nil {
							return err
						}
						got := probabilities(out)
						if len(got) != len(lines) {
							return fmt.Errorf("cube predict printed %d probabilities for %d lines:\n%s", len(got), len(lines), out)
						}
						for i, s := range lines {
							want, err := ctrmodel.Probability(models[0], s, 1)
							if err != nil {
								return err
							}
							if math.Abs(got[i].p-float64(want)) > 1e-6 {
								return fmt.Errorf("line %d: serving answered %.6f, the model %.6f", i+1, got[i].p, want)
							}
						}
						t.Logf("1,000 predictions through the serving Service: %s", lastLine(out))
						pods, err = k.servingPods(ns, "e2e-serving")
						return err
					},
					func(*terraform.State) error {
						_, err := k.startPredictJob(ns, image, "load", "one.txt", "--for", load, "--every", "20ms", "--timestamps")
						return err
					}),
			},
			{
				Config: e2eServingStack(ns, image, dense, 1),
				Check: func(*terraform.State) error {
					var v2 string
					if err := k.waitServed(ns, "e2e-cube", "2000", 4*time.Minute, &v2)(nil); err != nil {
						return err
					}
					if k.jobFinished(ns, "load") {
						return fmt.Errorf("the load job ended before version 2000 served (make --for longer than %s): %s", load, k.jobLogs(context.Background(), ns, "load"))
					}
					p := func(d int, gen byte) float64 {
						x, _ := ctrmodel.Probability(models[d], lines[0], gen)
						return float64(x)
					}
					out, err := k.loadThroughSwitch(ns, "load", p(1, 2))
					if err != nil {
						return err
					}
					w, err := switchWindow(probabilities(out), p(0, 1), p(1, 2), p(0, 2), p(1, 1))
					if err != nil {
						return err
					}
					st, _, err := k.transferStatus(context.Background(), ns, "e2e-cube")
					if err != nil {
						return err
					}
					var sparse time.Duration
					for _, r := range st.History {
						if r.ID == "2000" && r.Result == "served" {
							sparse = time.Duration(r.TotalMs) * time.Millisecond
						}
					}
					t.Logf("version 2000: donefile line → every cube replica serving %s; then dense follows: versions combined for %s (%d answers, %d mixing the shards' versions); line → dense and sparse both ≈ %s",
						sparse, w.mixed.Round(time.Millisecond), w.answers, w.others, (sparse + w.mixed).Round(time.Millisecond))
					// The launcher's poll and the server's reload check, with 3 s to fetch and load.
					if bound := launch.DefaultPoll + launch.DefaultReloadInterval + 3*time.Second; w.mixed > bound {
						return fmt.Errorf("predictions combined versions for %s, more than %s", w.mixed, bound)
					}
					now, err := k.servingPods(ns, "e2e-serving")
					if err != nil {
						return err
					}
					if fmt.Sprint(now) != fmt.Sprint(pods) {
						return fmt.Errorf("serving pods (name: restarts) were %v, now %v: the new version must not restart them", pods, now)
					}
					return nil
				},
			},
			{
				// A refresh reads the dense model every pod has in place.
				Config: e2eServingStack(ns, image, dense, 1),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ctr_serving.serving", tfjsonpath.New("model_id"), knownvalue.StringExact("2000")),
				},
			},
			{
				// Version 3000 without a serving model: the cube serves it, the pods keep 2000's
				// dense model (its URL answers 404)...
				Config: e2eServingStackOf(ns, image, dense, 2, false),
				Check: func(*terraform.State) error {
					var v3 string
					return k.waitServed(ns, "e2e-cube", "3000", 4*time.Minute, &v3)(nil)
				},
			},
			{
				// ...and a plan (this step's refresh) says so.
				Config: e2eServingStackOf(ns, image, dense, 2, false),
				Check: resource.ComposeTestCheckFunc(
					rec.expectRead(`Serving Behind The Cube: Serving ` + ns + `/e2e-serving: the cube serves donefile id 3000, and the serving pods' dense models are 2000: e2e-serving-`)),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ctr_serving.serving", tfjsonpath.New("model_id"), knownvalue.StringExact("2000")),
				},
			},
		},
	})
}

type stamped struct {
	at time.Time
	p  float64
}

// probabilities reads cube predict's output: one probability per line, after its Unix
// milliseconds with --timestamps; other lines (the latency summary) are skipped.
func probabilities(out string) []stamped {
	var ps []stamped
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		var s stamped
		switch len(f) {
		case 1:
		case 2:
			ms, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				continue
			}
			s.at = time.UnixMilli(ms)
		default:
			continue
		}
		p, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		s.p = p
		ps = append(ps, s)
	}
	return ps
}

type window struct {
	mixed           time.Duration
	answers, others int
}

// switchWindow classifies a steady load's answers through a switch from (old dense, old
// embeddings) to (new, new): how long answers were neither, which must end in new and never
// be the new dense model with the old embeddings.
func switchWindow(ps []stamped, old, next, mix, ahead float64) (window, error) {
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6 }
	var w window
	var firstMixed, firstNew time.Time
	for _, s := range ps {
		w.answers++
		switch {
		case firstNew.IsZero() && near(s.p, old):
		case near(s.p, next):
			if firstNew.IsZero() {
				firstNew = s.at
				if firstMixed.IsZero() {
					firstMixed = s.at
				}
			}
		case near(s.p, ahead):
			return w, fmt.Errorf("at %s the new dense model met the old embeddings (%.6f)", s.at, s.p)
		case !firstNew.IsZero():
			return w, fmt.Errorf("at %s, after the new version served, an answer of %.6f", s.at, s.p)
		default:
			if !near(s.p, mix) {
				w.others++
			}
			if firstMixed.IsZero() {
				firstMixed = s.at
			}
		}
	}
	if firstNew.IsZero() {
		return w, fmt.Errorf("no answer of the new version (%.6f) among %d", next, len(ps))
	}
	w.mixed = firstNew.Sub(firstMixed)
	return w, nil
}

// loadThroughSwitch reads the steady predict load's log until it has answered next for 5 s
// (or the Job ended), then stops the Job: the rest of its --for would show nothing new.
func (k *kubeClients) loadThroughSwitch(ns, job string, next float64) (string, error) {
	ctx := context.Background()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		out := k.jobLogs(ctx, ns, job)
		out = out[:strings.LastIndex(out, "\n")+1] // a line still being written is not read
		var first, last time.Time
		for _, s := range probabilities(out) {
			if math.Abs(s.p-next) <= 1e-6 {
				if first.IsZero() {
					first = s.at
				}
				last = s.at
			}
		}
		finished := k.jobFinished(ns, job)
		if finished || (!first.IsZero() && last.Sub(first) >= 5*time.Second) {
			err := k.cs.BatchV1().Jobs(ns).Delete(ctx, job, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
			return out, err
		}
		if time.Now().After(deadline) {
			return out, fmt.Errorf("the predict load did not answer with the new version (%.6f) within 4 minutes", next)
		}
		time.Sleep(2 * time.Second)
	}
}

// predictInput makes the ConfigMap predict Jobs read their lines and the model's
// configuration from.
func (k *kubeClients) predictInput(t *testing.T, ns string, files map[string]string) {
	t.Helper()
	files[servingconf.ModelConfFile] = string(mustMarshalModelConf(t))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "predict-input", Namespace: ns}, Data: files}
	if _, err := k.cs.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func mustMarshalModelConf(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	ctrmodel.ServingModel(t, dir)
	b, err := os.ReadFile(filepath.Join(dir, servingconf.ModelConfFile))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startPredictJob starts `cube predict` against the serving Service in a Job on the node.
func (k *kubeClients) startPredictJob(ns, image, name, input string, args ...string) (*batchv1.Job, error) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "predict", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
					Args: append([]string{"predict", "--addr", "e2e-serving." + ns + ".svc:" + strconv.Itoa(stack.DefaultServingPort),
						"--conf", "/in/" + servingconf.ModelConfFile, "--format", "criteo", "--sparse-dim", strconv.Itoa(e2eSparseDim)}, append(args, "/in/"+input)...),
					VolumeMounts: []corev1.VolumeMount{{Name: "in", MountPath: "/in"}},
				}},
				Volumes: []corev1.Volume{{Name: "in", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "predict-input"}}}}},
			}},
		},
	}
	return k.cs.BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{})
}

// predictJob runs a predict Job to its end and returns its log.
func (k *kubeClients) predictJob(ns, image, name string, timeout time.Duration, input string, args ...string) (string, error) {
	if _, err := k.startPredictJob(ns, image, name, input, args...); err != nil {
		return "", err
	}
	return k.waitJob(ns, name, timeout)
}

// servingPods is each serving pod's name and restart count.
func (k *kubeClients) servingPods(ns, name string) (map[string]int32, error) {
	l, err := k.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: stack.LabelInstance + "=" + name})
	if err != nil {
		return nil, err
	}
	out := map[string]int32{}
	for _, p := range l.Items {
		var n int32
		for _, c := range p.Status.ContainerStatuses {
			n += c.RestartCount
		}
		out[p.Name] = n
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no serving pod of %s/%s", ns, name)
	}
	return out, nil
}
