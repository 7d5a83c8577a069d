# Two shards of two replicas each, fed by a training job's donefile
# (usually ctr_training_job.<name>.donefile_url).
variable "donefile_url" {
  type    = string
  default = "http://ctr-demo-fileserver.default.svc:8080/output/ctr_cube/donefile/base.txt"
}

resource "ctr_cube" "cube" {
  name         = "ctr-cube"
  namespace    = "default"
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
}

output "cube_conf" {
  value = ctr_cube.cube.cube_conf
}
