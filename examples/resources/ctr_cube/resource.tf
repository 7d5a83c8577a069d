# Two shards of two replicas each, fed by a training job's donefile
# (usually ctr_training_job.<name>.donefile_url).
variable "donefile_url" {
  type    = string
  default = "http://ctr-demo-fileserver.default.svc:8080/output/ctr_cube/donefile/base.txt"
}

resource "ctr_cube" "cube" {
  name         = "ctr-cube"
  namespace    = "default"
  stack        = "elastic-ctr" # ctr_serving pods of the same stack may reach the shards
  dict         = "test_dict"
  shards       = 2
  replicas     = 2
  donefile_url = var.donefile_url
  mode         = "base_delta"

  resources = {
    requests = { cpu = "2", memory = "8Gi" }
    limits   = { memory = "16Gi" }
  }
  storage = {
    size = "50Gi"
  }

  # Only the transfer and the stack's ctr_serving pods reach the shards (where the CNI
  # enforces NetworkPolicies); admit a Prometheus in the monitoring namespace as well.
  network_policy = {
    allow_from = [{
      namespace_labels = { "kubernetes.io/metadata.name" = "monitoring" }
      pod_labels       = { "app.kubernetes.io/name" = "prometheus" }
    }]
  }
}

output "cube_conf" {
  value = ctr_cube.cube.cube_conf
}
