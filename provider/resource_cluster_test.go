package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/elasticctr/terraform-provider-ctr/internal/kube"
	"github.com/elasticctr/terraform-provider-ctr/internal/testenv"
)

// volcanoManifest is the local control plane's own copy of a Volcano release manifest.
func volcanoManifest(t *testing.T) string {
	t.Helper()
	env, err := testenv.Load(filepath.Dir(os.Getenv("KUBECONFIG")))
	if err != nil {
		t.Fatalf("the local control plane's description: %v", err)
	}
	return "file://" + env.VolcanoManifest
}

// TestAccCluster_AdoptExisting: an existing cluster (the local control plane, through its
// kubeconfig) is adopted; only Volcano is managed, installed from a mirror URL, and the
// cluster's connection feeds a training job in the same apply.
func TestAccCluster_AdoptExisting(t *testing.T) {
	k := requireCluster(t)
	manifest := volcanoManifest(t)
	ns, name := k.namespace(t), jobName()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
resource "ctr_cluster" "this" {
  kubernetes = { config_path = %[1]q }
  volcano = {
    manifest_url    = %[2]q
    keep_on_destroy = true # the control plane's own Volcano serves the other tests
  }
}

resource "ctr_training_job" "test" {
  kubernetes = ctr_cluster.this.kubernetes
  name       = %[4]q
  namespace  = %[3]q
  pserver    = { replicas = 1 }
  trainer    = { replicas = 1 }
  depends_on = [ctr_cluster.this]
}
`, os.Getenv("KUBECONFIG"), manifest, ns, name),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("phase"), knownvalue.StringExact("adopted")),
				statecheck.ExpectKnownValue("ctr_cluster.this", tfjsonpath.New("volcano_objects"), knownvalue.ListSizeExact(countDocs(t, manifest))),
				statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("phase"), knownvalue.StringExact("Running")),
			},
			Check: func(*terraform.State) error {
				crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
				u, err := k.dyn.Resource(crd).Get(context.Background(), "jobs.batch.volcano.sh", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if u.GetLabels()["ctr.elasticctr.io/owner"] != volcanoOwner {
					return fmt.Errorf("the Volcano job CRD is not labelled as installed by ctr_cluster: %v", u.GetLabels())
				}
				dep, err := k.cs.AppsV1().Deployments("volcano-system").Get(context.Background(), "volcano-scheduler", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if dep.Status.AvailableReplicas != 1 {
					return fmt.Errorf("volcano-scheduler is not available")
				}
				return nil
			},
		}},
	})
}

func countDocs(t *testing.T, fileURL string) int {
	t.Helper()
	data, err := os.ReadFile(fileURL[len("file://"):])
	if err != nil {
		t.Fatal(err)
	}
	set, err := parseForTest(data)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func parseForTest(data []byte) (int, error) {
	set, err := kube.ParseManifest(data, nil)
	return len(set), err
}
