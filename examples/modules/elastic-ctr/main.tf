# The ElasticCTR stack on any conformant Kubernetes cluster with Volcano: PaddlePaddle
# parameter-server training, the cube sparse-parameter service fed by its donefile, and Paddle
# Serving reading the cube. The cluster is the one the caller's `ctr` provider connects to.

# The stack's own namespace when asked for; otherwise the namespace must exist.
resource "ctr_namespace" "this" {
  count = var.create_namespace ? 1 : 0
  name  = var.namespace
}

locals {
  # Through the resource, so that the namespace exists before the workloads and goes after them.
  namespace = var.create_namespace ? ctr_namespace.this[0].name : var.namespace
  ps        = var.training.mode == "ps"
  gpus      = var.training.gpus > 0 ? var.training.gpus : null
  resources = {
    requests = var.training.requests
    limits   = var.training.limits
  }
}

resource "ctr_training_job" "this" {
  name      = "${var.name}-train"
  namespace = local.namespace
  stack     = var.name
  image     = var.training.image
  entry     = var.training.entry
  mode      = var.training.mode
  pserver   = local.ps ? merge(local.resources, { replicas = var.training.pservers, gpus = null }) : null
  trainer   = local.ps ? merge(local.resources, { replicas = var.training.trainers, gpus = local.gpus }) : null
  worker    = local.ps ? null : merge(local.resources, { replicas = var.training.workers, gpus = local.gpus })
  dataset   = var.dataset
  model_output = {
    size          = var.model_output.size
    storage_class = var.model_output.storage_class
    access_mode   = var.model_output.access_mode
  }
  model_export = var.model_export
}

resource "ctr_cube" "this" {
  name         = "${var.name}-cube"
  namespace    = local.namespace
  stack        = var.name
  donefile_url = ctr_training_job.this.donefile_url
  shards       = var.cube.shards
  replicas     = var.cube.replicas
  image        = var.cube.image
  mode         = var.cube.mode
  resources    = var.cube.requests == null && var.cube.limits == null ? null : { requests = var.cube.requests, limits = var.cube.limits }
  storage      = var.cube.storage
}

resource "ctr_serving" "this" {
  name         = "${var.name}-serving"
  namespace    = local.namespace
  stack        = var.name
  image        = var.serving.image
  replicas     = var.serving.replicas
  service_type = var.serving.service_type
  cube_conf    = ctr_cube.this.cube_conf
  model_url    = coalesce(var.serving.model_url, "${ctr_training_job.this.file_server_url}/output/ctr_model.tar.gz")
  # The pods wait for the first model (a first training pass takes minutes): apply does not.
  wait      = var.serving.wait
  resources = var.serving.requests == null && var.serving.limits == null ? null : { requests = var.serving.requests, limits = var.serving.limits }
}
