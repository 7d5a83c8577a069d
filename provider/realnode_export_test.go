package provider

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// e2eExportStack is a training job whose trainer stand-in saves its embedding as Paddle's
// save_persistables does (models/pass-<gen>/SparseFeatFactors, an FP32 LoDTensor) and
// writes nothing for the cube; the job's model export turns the save into a cube version;
// a cube of 2 shards × 2 replicas follows the donefile.
func e2eExportStack(ns, image string, gen int) string {
	command := fmt.Sprintf(`["/cube", "model", "--format", "lodtensor", "--out", "/data/models/pass-%d", "--keys", "%d", "--gen", "%d"]`, gen, e2eModelKeys, gen)
	return e2eTrainingRunning(ns, image, command, "  model_export      = { interval_seconds = 1 }") + e2eCube(ns, image, 2)
}

// TestAccRealNode/PaddleSaveToLookup: what Paddle saves reaches the cube with no Paddle and
// no dumper. The trainer stand-in saves a LoDTensor exactly as Paddle lays it out; the model
// export publishes it; the cube serves it, and a Job on the node looks every row up through
// the exported cube_conf, bit for bit. Then a retraining (the job replaced, generation 2):
// the cube moves to the new version, and the first version stays on the model volume, which
// the replaced job kept, where serving can still read it.
func realNodePaddleSaveToLookup(t *testing.T) {
	k, ns, image := requireRealNode(t)
	var v1, v2 string
	var ids []string
	k.testE2E(t, ns, resource.TestCase{
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
