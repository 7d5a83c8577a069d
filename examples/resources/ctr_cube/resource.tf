# Two shards of two replicas each, fed by the training job's donefile.
resource "ctr_cube" "cube" {
  name         = "ctr-cube"
  namespace    = "default"
  dict         = "test_dict"
  shards       = 2
  replicas     = 2
  donefile_url = ctr_training_job.ctr.donefile_url
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
