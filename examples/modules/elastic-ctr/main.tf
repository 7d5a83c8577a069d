# The ElasticCTR stack on any conformant Kubernetes cluster with Volcano: PaddlePaddle
# parameter-server training, the cube sparse-parameter service fed by its donefile, and Paddle
# Serving reading the cube.

resource "ctr_training_job" "this" {
  kubernetes = var.kubernetes
  name       = "${var.name}-train"
  namespace  = var.namespace
  stack      = var.name
  image      = var.training.image
  entry      = var.training.entry
  pserver = {
    replicas = var.training.pservers
    requests = var.training.requests
    limits   = var.training.limits
  }
  trainer = {
    replicas = var.training.trainers
    requests = var.training.requests
    limits   = var.training.limits
  }
  dataset      = var.dataset
  model_output = { size = var.model_output_size }
}

resource "ctr_cube" "this" {
  kubernetes   = var.kubernetes
  name         = "${var.name}-cube"
  namespace    = var.namespace
  stack        = var.name
  donefile_url = ctr_training_job.this.donefile_url
  shards       = var.cube.shards
  replicas     = var.cube.replicas
  image        = var.cube.image
  mode         = var.cube.mode
}

resource "ctr_serving" "this" {
  kubernetes   = var.kubernetes
  name         = "${var.name}-serving"
  namespace    = var.namespace
  stack        = var.name
  image        = var.serving.image
  replicas     = var.serving.replicas
  service_type = var.serving.service_type
  cube_conf    = ctr_cube.this.cube_conf
  model_url    = "${ctr_training_job.this.file_server_url}/output/ctr_model.tar.gz"
}
