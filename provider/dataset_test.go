package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// TestAccTrainingJob_Datasets: a dataset in an S3-compatible bucket (BOS here) reaches the
// live trainers as the variables AWS's SDKs read, its keys by reference to the user's Secret
// (Terraform never sees them). Moving the dataset to a volume replaces the job; the live trainers then mount the claim
// read-only and the parameter servers do not. Both import back.
func TestAccTrainingJob_Datasets(t *testing.T) {
	t.Parallel()
	k, ns, name := trainingJobTest(t)
	ctx := context.Background()
	// The claim the volume dataset names exists, so that the trainers start and the apply's
	// wait ends when they run, not at its timeout.
	k.claim(t, ns, "samples")
	s3 := trainingJobConfig(ns, name, `  dataset = {
    path       = "/train_data"
    start_hour = "20200401/00"
    s3 = {
      bucket             = "ads-samples"
      endpoint           = "https://s3.bj.bcebos.com"
      region             = "bj"
      credentials_secret = "bos-keys"
    }
  }`)
	volume := trainingJobConfig(ns, name, `  dataset = {
    path   = "/day1"
    volume = { claim_name = "samples" }
  }`)
	owner := stack.Owner(stack.TrainingJobType, name)
	steps := []resource.TestStep{
		{
			Config: s3,
			Check: k.checkTrainerEnv(ns, owner, map[string]string{"DATASET_SOURCE": "s3", "DATASET_URL": "s3://ads-samples/train_data",
				"AWS_ENDPOINT_URL": "https://s3.bj.bcebos.com", "AWS_REGION": "bj", "START_DATE_HR": "20200401/00"},
				map[string]string{"AWS_ACCESS_KEY_ID": "bos-keys", "AWS_SECRET_ACCESS_KEY": "bos-keys"}),
		},
	}
	steps = append(steps, importRoundTrip(stack.TrainingJobType, ns+"/"+name, s3, "last_condition", "tasks")...)
	steps = append(steps,
		resource.TestStep{
			Config: volume,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(jobAddr, plancheck.ResourceActionDestroyBeforeCreate),
			}},
			Check: k.checkTrainerEnv(ns, owner, map[string]string{"DATASET_SOURCE": "volume", "DATASET_PATH": stack.DefaultDatasetMountPath + "/day1"}, nil),
		},
		resource.TestStep{
			Config: volume,
			Check: func(*terraform.State) error {
				tpls, err := k.podTemplates(ctx, ns, owner)
				if err != nil {
					return err
				}
				for key, tpl := range tpls {
					var claim *corev1.PersistentVolumeClaimVolumeSource
					for _, v := range tpl.Spec.Volumes {
						if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "samples" {
							claim = v.PersistentVolumeClaim
						}
					}
					trainer := regexp.MustCompile(`/trainer$`).MatchString(key)
					if trainer != (claim != nil) {
						return fmt.Errorf("%s: mounts the dataset claim: %v, want %v", key, claim != nil, trainer)
					}
					if claim != nil && !claim.ReadOnly {
						return fmt.Errorf("%s: the dataset claim is mounted writable", key)
					}
				}
				return nil
			},
		})
	steps = append(steps, importRoundTrip(stack.TrainingJobType, ns+"/"+name, volume, "last_condition", "tasks")...)
	k.run(t, ns, stack.TrainingJobType, name, steps...)
}
