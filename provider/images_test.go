package provider

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
	"github.com/elasticctr/terraform-provider-ctr/internal/version"
)

// testMirror is where TestAccImages_* redirect every default image.
const testMirror = "mirror.example:5000"

// imagesStack is a training job, a cube and Paddle Serving with default images, pull secrets,
// and the provider's image_registry; servingImage ("" for the default) is Serving's own.
func imagesStack(ns, name, servingImage string) string {
	return imagesStackFrom(testMirror, ns, name, servingImage)
}

func imagesStackFrom(registry, ns, name, servingImage string) string {
	own := ""
	if servingImage != "" {
		own = fmt.Sprintf("  image = %q\n", servingImage)
	}
	return fmt.Sprintf(`
provider "ctr" {
  image_registry = %[3]q
}

resource "ctr_training_job" "test" {
  name               = %[2]q
  namespace          = %[1]q
  pserver            = { replicas = 1 }
  trainer            = { replicas = 1 }
  image_pull_secrets = ["mirror-pull"]
  timeouts           = { create = "3m", update = "3m", delete = "3m" }
}

resource "ctr_cube" "test" {
  name               = "%[2]s-cube"
  namespace          = %[1]q
  donefile_url       = ctr_training_job.test.donefile_url
  shards             = 1
  replicas           = 1
  image_pull_secrets = ["mirror-pull"]
  timeouts           = { create = "3m", update = "3m", delete = "3m" }
}

resource "ctr_serving" "test" {
  name               = "%[2]s-serving"
  namespace          = %[1]q
  cube_conf          = ctr_cube.test.cube_conf
  image_pull_secrets = ["mirror-pull", "team-pull"]
%[4]s  timeouts           = { create = "3m", update = "3m", delete = "3m" }
}
`, ns, name, registry, own)
}

// TestAccImages_MirrorAndPullSecrets: with the provider's image_registry every default image
// comes from the mirror — the training tasks, the file server, the cube servers and transfer,
// Paddle Serving — on the live pods, each with its resource's pull secrets; an image set
// explicitly is used as it is.
func TestAccImages_MirrorAndPullSecrets(t *testing.T) {
	t.Parallel()
	k := requireCluster(t)
	ns, name := k.namespace(t), jobName()
	cube := stack.MirrorImage(testMirror, stack.CubeImage(testVersion))
	want := map[string]string{
		"training": testMirror + "/" + stack.DefaultImage, "fileserver": cube, "cube-server": cube, "cube-transfer": cube,
		"serving": stack.MirrorImage(testMirror, stack.DefaultServingImage), "serving/install-launcher": cube,
	}
	one, two := []string{"mirror-pull"}, []string{"mirror-pull", "team-pull"}
	secrets := map[string][]string{"training": one, "fileserver": one, "cube-server": one, "cube-transfer": one, "serving": two}
	explicit := "registry.example.com/team/serving:1"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy: resource.ComposeTestCheckFunc(
			k.nothingLeftOf(ns, stack.TrainingJobType, name),
			k.nothingLeftOf(ns, stack.CubeType, name+"-cube"),
			k.nothingLeftOf(ns, stack.ServingType, name+"-serving")),
		Steps: []resource.TestStep{
			{
				Config: imagesStack(ns, name, ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("image"), knownvalue.StringExact(want["training"])),
					statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("image"), knownvalue.StringExact(cube)),
					statecheck.ExpectKnownValue(servingAddr, tfjsonpath.New("image"), knownvalue.StringExact(want["serving"])),
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("manifests"), knownvalue.MapPartial(map[string]knownvalue.Check{
						"apps/v1/Deployment/" + name + "-fileserver": knownvalue.StringRegexp(regexp.MustCompile(regexp.QuoteMeta("image: " + cube))),
					})),
				},
				Check: k.livePods(ns, want, secrets),
			},
			{
				Config: imagesStack(ns, name, explicit),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(servingAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionNoop),
				}},
				Check: func(s *terraform.State) error {
					want["serving"] = explicit
					return k.deploymentImage(ns, name+"-serving", explicit)(s)
				},
			},
			{
				// Another mirror: the training job is replaced (its image changes), the cube keeps
				// the image it was created with, Serving's own image stays and its launcher
				// comes from the new mirror (an update: the pods roll).
				Config: imagesStackFrom("mirror2.example", ns, name, explicit),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionDestroyBeforeCreate),
					plancheck.ExpectResourceAction(cubeAddr, plancheck.ResourceActionNoop),
					plancheck.ExpectResourceAction(servingAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(jobAddr, tfjsonpath.New("image"), knownvalue.StringExact("mirror2.example/"+stack.DefaultImage)),
				},
			},
			{ResourceName: servingAddr, ImportState: true, ImportStateId: ns + "/" + name + "-serving", ImportStateVerify: true, ImportStateVerifyIgnore: []string{"timeouts"}},
		},
	})
}

// TestAccImages_RegistryKnownOnlyAtApply: an image_registry that comes from a resource of the
// same run is known only at apply. The plan says so (the cube's image and manifests are
// unknown, not the defaults without the mirror), and the apply runs the mirror's images.
func TestAccImages_RegistryKnownOnlyAtApply(t *testing.T) {
	t.Parallel()
	k := requireCluster(t)
	ns, name := k.namespace(t), jobName()
	cube := stack.MirrorImage(testMirror, stack.CubeImage(testVersion))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy:             k.nothingLeftOf(ns, stack.CubeType, name),
		Steps: []resource.TestStep{{
			Config: fmt.Sprintf(`
resource "terraform_data" "registry" {
  input = %[3]q
}

provider "ctr" {
  image_registry = terraform_data.registry.output
}

resource "ctr_cube" "test" {
  name         = %[2]q
  namespace    = %[1]q
  donefile_url = "http://files.%[1]s.svc:8080/donefile/base.txt"
  shards       = 1
  replicas     = 1
  timeouts     = { create = "3m", update = "3m", delete = "3m" }
}
`, ns, name, testMirror),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectUnknownValue(cubeAddr, tfjsonpath.New("image")),
				plancheck.ExpectUnknownValue(cubeAddr, tfjsonpath.New("manifests")),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("image"), knownvalue.StringExact(cube)),
				statecheck.ExpectKnownValue(cubeAddr, tfjsonpath.New("manifests"), knownvalue.MapPartial(map[string]knownvalue.Check{
					"apps/v1/StatefulSet/" + name + "-shard-0": knownvalue.StringRegexp(regexp.MustCompile(regexp.QuoteMeta("image: " + cube))),
				})),
			},
			Check: k.livePods(ns, map[string]string{"cube-server": cube, "cube-transfer": cube}, map[string][]string{}),
		}},
	})
}

// TestImages_RegistryRefused: an image_registry that is not a registry host is refused at plan
// time, at the attribute.
func TestImages_RegistryRefused(t *testing.T) {
	t.Parallel()
	resource.UnitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		Steps: []resource.TestStep{{
			Config:      "provider \"ctr\" {\n  image_registry = \"https://mirror.example\"\n}\n" + servingConfig("default", "s", "1", ""),
			PlanOnly:    true,
			ExpectError: detailRE(`image_registry .* must be a registry host, optionally with a port and a path, without a scheme`),
		}},
	})
}

// TestAccCluster_VolcanoFromMirror: ctr_cluster installs the Volcano release with every image
// from the provider's image_registry; an upgrade without it goes back to the release's own.
func TestAccCluster_VolcanoFromMirror(t *testing.T) {
	k := requireCluster(t)
	manifest := volcanoManifest(t)
	cfg := func(registry, version string) string {
		return fmt.Sprintf(`
provider "ctr" {
  image_registry = %q
}

resource "ctr_cluster" "this" {
  kubernetes = { config_path = %q }
  volcano = {
    mode            = "adopt" # the control plane has Volcano: take it over, to install
    version         = %q
    manifest_url    = %q
    keep_on_destroy = true # the control plane's own Volcano serves the other tests
  }
}
`, registry, os.Getenv("KUBECONFIG"), version, manifest)
	}
	schedulerImage := func(mirrored bool) resource.TestCheckFunc {
		return func(*terraform.State) error {
			d, err := k.cs.AppsV1().Deployments("volcano-system").Get(context.Background(), "volcano-scheduler", metav1.GetOptions{})
			if err != nil {
				return err
			}
			image := d.Spec.Template.Spec.Containers[0].Image
			if strings.HasPrefix(image, testMirror+"/") != mirrored {
				return fmt.Errorf("volcano-scheduler runs %s (from the mirror: %v, want %v)", image, !mirrored, mirrored)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		Steps: []resource.TestStep{
			{Config: cfg(testMirror, "test-mirror"), Check: schedulerImage(true)},
			{Config: strings.Replace(cfg(testMirror, "test"), "image_registry = \""+testMirror+"\"", "", 1), Check: schedulerImage(false)},
		},
	})
}

// TestAccImages_NoVersionNoDefault: a provider binary without a version (version.Dev) knows
// no published cube image, so a cube or a training job that leaves its cube image unset is
// refused at plan time with what to set, instead of defaulting to a moving :latest; with the
// images set, the same configuration plans.
func TestAccImages_NoVersionNoDefault(t *testing.T) {
	t.Parallel()
	requireCluster(t)
	dev := map[string]func() (tfprotov6.ProviderServer, error){"ctr": providerserver.NewProtocol6WithError(New(version.Dev)())}
	const job = `
resource "ctr_training_job" "test" {
  name      = "nover"
  namespace = "default"
  pserver   = { replicas = 1 }
  trainer   = { replicas = 1 }
%s}
`
	const cube = `
resource "ctr_cube" "test" {
  name         = "nover"
  namespace    = "default"
  donefile_url = "http://nover-fileserver.default.svc:8080/model/donefile/base.txt"
%s}
`
	built := `  image = "registry.example.com/team/cube:1"` + "\n"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: dev,
		Steps: []resource.TestStep{
			{Config: fmt.Sprintf(job, ""), ExpectError: regexp.MustCompile(`file_server\.image:\s+has\s+no\s+default`)},
			{Config: fmt.Sprintf(cube, ""), ExpectError: regexp.MustCompile(`Attribute\s+image:\s+has\s+no\s+default`)},
			{
				Config:             fmt.Sprintf(job, "  file_server = {\n  "+built+"  }\n") + fmt.Sprintf(cube, built),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
		},
	})
}
