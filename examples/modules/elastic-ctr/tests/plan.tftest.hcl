# The module's plan, with no cluster: ctr renders every Kubernetes object at plan time
# (`manifests`) and contacts no cluster for resources that do not exist yet. The address below
# is closed on purpose: a plan that tried to reach a cluster would fail.
provider "ctr" {
  kubernetes = { host = "https://127.0.0.1:9", token = "not-a-cluster" }
}

run "defaults" {
  command = plan

  assert {
    condition     = ctr_training_job.this.name == "ctr-train" && ctr_cube.this.name == "ctr-cube" && ctr_serving.this.name == "ctr-serving"
    error_message = "every resource is named after var.name"
  }
  assert {
    condition     = length([for k in keys(ctr_cube.this.manifests) : k if startswith(k, "apps/v1/StatefulSet/ctr-cube-shard-")]) == 2
    error_message = "the cube renders one StatefulSet per shard, 2 by default"
  }
  assert {
    condition     = ctr_serving.this.cube_conf == ctr_cube.this.cube_conf
    error_message = "serving reads the cube's cube.conf"
  }
}

run "shards_and_namespace" {
  command = plan
  variables {
    name      = "ads"
    namespace = "ads-prod"
    cube      = { shards = 4, replicas = 3 }
  }

  assert {
    condition     = length([for k in keys(ctr_cube.this.manifests) : k if startswith(k, "apps/v1/StatefulSet/ads-cube-shard-")]) == 4
    error_message = "cube.shards = 4 renders 4 shard StatefulSets"
  }
  assert {
    condition     = alltrue([for k in keys(ctr_cube.this.manifests) : yamldecode(ctr_cube.this.manifests[k]).metadata.namespace == "ads-prod"])
    error_message = "every cube object is in var.namespace"
  }
  assert {
    condition     = yamldecode(ctr_cube.this.manifests["apps/v1/StatefulSet/ads-cube-shard-3"]).spec.replicas == 3
    error_message = "cube.replicas = 3 is each shard's StatefulSet's replicas"
  }
  assert {
    condition     = length(jsondecode(output.cube_conf)[0].nodes) == 4
    error_message = "the cube.conf output names 4 shards"
  }
}

run "bad_mode_refused" {
  command = plan
  variables {
    training = { mode = "allreduce" }
  }
  expect_failures = [var.training]
}

run "bad_cube_refused" {
  command = plan
  variables {
    cube = { shards = 0 }
  }
  expect_failures = [var.cube]
}
