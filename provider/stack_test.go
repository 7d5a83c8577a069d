package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/config"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/elasticctr/terraform-provider-ctr/internal/stack"
)

// TestAccStack_ExampleOneApply applies examples/stack as it is: training job -> cube ->
// serving in one apply on the local control plane; the framework then checks that the next
// plan is empty. A second step re-shards the cube, which rolls Serving (new cube.conf).
// Terraform runs as an identity holding only the RBAC guide's ClusterRole in the namespace,
// so every step, the waits and the destroy show that the guide's rules are enough.
func TestAccStack_ExampleOneApply(t *testing.T) {
	k := requireCluster(t)
	ns := k.namespace(t)
	kubeconfig := k.workloadsKubeconfig(t, ns)
	t.Setenv("TF_ACC_PROVIDER_NAMESPACE", "elasticctr") // the example's required_providers source
	vars := func(shards int) config.Variables {
		return config.Variables{"namespace": config.StringVariable(ns), "cube_shards": config.IntegerVariable(shards),
			"kubeconfig": config.StringVariable(kubeconfig)}
	}
	resource.Test(t, resource.TestCase{
		CheckDestroy: resource.ComposeTestCheckFunc(
			k.nothingLeftOf(ns, stack.TrainingJobType, "ctr-demo"),
			k.nothingLeftOf(ns, stack.CubeType, "ctr-cube"),
			k.nothingLeftOf(ns, stack.ServingType, "ctr-serving")),
		Steps: []resource.TestStep{
			{
				ProtoV6ProviderFactories: providerFactories,
				ConfigDirectory:          config.StaticDirectory("../examples/stack"),
				ConfigVariables:          vars(2),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("ctr_training_job.ctr", tfjsonpath.New("phase"), knownvalue.StringExact("Running")),
					statecheck.ExpectKnownOutputValue("serving_url", knownvalue.StringExact("http://ctr-serving."+ns+".svc:8010")),
				},
				Check: k.statefulSetReplicas(ns, "ctr-cube-shard-1", 1),
			},
			{
				ProtoV6ProviderFactories: providerFactories,
				ConfigDirectory:          config.StaticDirectory("../examples/stack"),
				ConfigVariables:          vars(3),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ctr_cube.cube", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("ctr_serving.serving", plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction("ctr_training_job.ctr", plancheck.ResourceActionNoop),
				}},
				Check: k.statefulSetReplicas(ns, "ctr-cube-shard-2", 1),
			},
		},
	})
}
