package provider

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/elasticctr/terraform-provider-ctr/cube/donefile"
	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// e2eExportStack is a training job whose trainer stand-in saves its embedding as Paddle's
// save_persistables does (models/pass-<gen>/SparseFeatFactors, an FP32 LoDTensor) and
// writes nothing for the cube; the job's model export turns the save into a cube version;
// a cube of 2 shards × 2 replicas follows the donefile.
func e2eExportStack(ns, image string, gen int) string {
	command := fmt.Sprintf(`["/cube", "model", "--format", "lodtensor", "--out", "/data/models/pass-%d", "--keys", "%d", "--gen", "%d"]`, gen, e2eModelKeys, gen)
	return e2eTrainingRunning(ns, image, command, "  model_export      = { interval_seconds = 1 }") + e2eCube(ns, image, 2)
}

// TestAccRealNode_PaddleSaveToLookup: what Paddle saves reaches the cube with no Paddle and
// no dumper. The trainer stand-in saves a LoDTensor exactly as Paddle lays it out; the model
// export publishes it; the cube serves it, and a Job on the node looks every row up through
// the exported cube_conf, bit for bit. Then a retraining (the job replaced, generation 2):
// the cube moves to the new version, and the first version stays on the model volume, which
// the replaced job kept, where serving can still read it.
func TestAccRealNode_PaddleSaveToLookup(t *testing.T) {
	k, ns, image := requireRealNode(t)
	var v1, v2 string
	var ids []string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy: resource.ComposeTestCheckFunc(
			k.checkNothingOwnedOf(ns, stack.Owner(stack.TrainingJobType, "e2e"), stack.TrainingJobKinds),
			k.checkNothingOwnedOf(ns, stack.Owner(stack.CubeType, "e2e-cube"), stack.CubeKinds)),
		Steps: []resource.TestStep{
			{
				Config: e2eExportStack(ns, image, 1),
				Check: resource.ComposeTestCheckFunc(
					k.waitDonefile(ns, 1, 4*time.Minute, &ids),
					func(s *terraform.State) error { return k.waitServed(ns, "e2e-cube", ids[0], 4*time.Minute, &v1)(s) },
					k.lookupJob(t, ns, image, "lookup-1", 1)),
			},
			{
				Config: e2eExportStack(ns, image, 2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ctr_training_job.train", plancheck.ResourceActionDestroyBeforeCreate),
				}},
				Check: resource.ComposeTestCheckFunc(
					k.waitDonefile(ns, 2, 4*time.Minute, &ids),
					func(s *terraform.State) error { return k.waitServed(ns, "e2e-cube", ids[1], 4*time.Minute, &v2)(s) },
					k.lookupJob(t, ns, image, "lookup-2", 2),
					// The first version is still published: its input folder lists its files.
					func(s *terraform.State) error {
						listing, err := k.fileServerGet(s, ns, "/data/data/"+ids[0]+"/")
						if err != nil {
							return err
						}
						if !strings.Contains(string(listing), "part-00000") {
							return fmt.Errorf("version %s's folder after the retraining: %q, want part-00000 listed", ids[0], listing)
						}
						t.Logf("served %s (id %s), then %s (id %s); version %s still on the kept volume", v1, ids[0], v2, ids[1], ids[0])
						return nil
					}),
			},
		},
	})
}

// fileServerGet fetches a path from the training job's file server (the host of the state's
// donefile_url) through the API server's service proxy.
func (k *kubeClients) fileServerGet(s *terraform.State, ns, path string) ([]byte, error) {
	u, err := url.Parse(s.RootModule().Resources["ctr_training_job.train"].Primary.Attributes["donefile_url"])
	if err != nil {
		return nil, err
	}
	svc, port, _ := strings.Cut(u.Host, ":")
	svc, _, _ = strings.Cut(svc, ".")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := k.cs.CoreV1().Services(ns).ProxyGet("http", svc, port, path, nil).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("GET %s through service %s/%s: %w", path, ns, svc, err)
	}
	return b, nil
}

// waitDonefile waits until the donefile the training job exports has n lines, and returns
// their ids.
func (k *kubeClients) waitDonefile(ns string, n int, timeout time.Duration, ids *[]string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		u, err := url.Parse(s.RootModule().Resources["ctr_training_job.train"].Primary.Attributes["donefile_url"])
		if err != nil {
			return err
		}
		var last string
		err = wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(context.Context) (bool, error) {
			body, err := k.fileServerGet(s, ns, u.Path)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			last = string(body)
			es, _ := donefile.Parse(body)
			if len(es) < n {
				return false, nil
			}
			*ids = (*ids)[:0]
			for _, e := range es {
				*ids = append(*ids, e.ID)
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("the model export did not publish %d versions within %s: %w; donefile: %s; export log: %s", n, timeout, err, last,
				k.deploymentLogs(ns, "e2e-model-export"))
		}
		return nil
	}
}

// deploymentLogs is the log of the first pod whose name starts with a Deployment's (for
// failure messages).
func (k *kubeClients) deploymentLogs(ns, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pods, err := k.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "(no pods: " + err.Error() + ")"
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, name+"-") {
			data, err := k.cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				return "(no log of " + p.Name + ": " + err.Error() + ")"
			}
			return string(data)
		}
	}
	return "(no pod " + name + "-*)"
}
