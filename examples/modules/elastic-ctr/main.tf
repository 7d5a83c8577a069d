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
  # GPUs go where the provider renders them: to trainers (ps) and workers (collective). A
  # parameter server keeps its tables on CPUs, and the provider refuses GPUs there. 0 is
  # passed as none, as the module always did, so that a job is not replaced for it.
  gpus = coalesce(var.training.gpus, 0) > 0 ? var.training.gpus : null
}

resource "ctr_training_job" "this" {
  name                       = "${var.name}-train"
  namespace                  = local.namespace
  stack                      = var.name
  recipe                     = var.training.recipe
  image                      = var.training.image
  image_pull_policy          = var.training.image_pull_policy
  image_pull_secrets         = var.image_pull_secrets
  command                    = var.training.command
  entry                      = var.training.entry
  mode                       = var.training.mode
  queue                      = var.training.queue
  min_available              = var.training.min_available
  max_retry                  = var.training.max_retry
  ttl_seconds_after_finished = var.training.ttl_after_finish
  pserver                    = local.ps ? { replicas = var.training.pservers, requests = var.training.requests, limits = var.training.limits } : null
  trainer                    = local.ps ? { replicas = var.training.trainers, requests = var.training.requests, limits = var.training.limits, gpus = local.gpus } : null
  worker                     = local.ps ? null : { replicas = var.training.workers, requests = var.training.requests, limits = var.training.limits, gpus = local.gpus }
  pod                        = lookup(var.pods, "training", null)
  slot_config                = var.training.slot_config
  # Built attribute by attribute, so that only hdfs_ugi is sensitive in the plan.
  dataset = var.dataset == null ? null : {
    hdfs_address = var.dataset.hdfs_address
    hdfs_ugi     = var.hdfs_ugi
    path         = var.dataset.path
    start_hour   = var.dataset.start_hour
    end_hour     = var.dataset.end_hour
    sparse_dim   = var.dataset.sparse_dim
    s3           = var.dataset.s3
    volume       = var.dataset.volume
  }
  model_output = {
    size           = var.model_output.size
    storage_class  = var.model_output.storage_class
    access_mode    = var.model_output.access_mode
    existing_claim = var.model_output.existing_claim
    retain         = var.model_output.retain
  }
  model_export = var.model_export
  file_server = {
    image        = var.file_server.image
    replicas     = var.file_server.replicas
    service_type = var.file_server.service_type
    resources    = var.file_server.requests == null && var.file_server.limits == null ? null : { requests = var.file_server.requests, limits = var.file_server.limits }
    pod          = lookup(var.pods, "file_server", null)
  }
  wait = var.training.wait
}

resource "ctr_cube" "this" {
  name                   = "${var.name}-cube"
  namespace              = local.namespace
  stack                  = var.name
  donefile_url           = ctr_training_job.this.donefile_url
  shards                 = var.cube.shards
  replicas               = var.cube.replicas
  image                  = var.cube.image
  image_pull_secrets     = var.image_pull_secrets
  mode                   = var.cube.mode
  serve_version          = var.cube.serve_version
  resources              = var.cube.requests == null && var.cube.limits == null ? null : { requests = var.cube.requests, limits = var.cube.limits }
  storage                = var.cube.storage
  transfer_storage       = var.cube.transfer_storage
  transfer_storage_class = var.cube.transfer_storage_class
  transfer_resources     = var.cube.transfer_resources
  disruption_budget      = var.cube.disruption_budget
  spread                 = var.cube.spread
  network_policy         = var.cube.network_policy
  metrics                = var.cube.metrics
  pod                    = lookup(var.pods, "cube", null)
}

resource "ctr_serving" "this" {
  name                = "${var.name}-serving"
  namespace           = local.namespace
  stack               = var.name
  image               = var.serving.image
  launcher_image      = var.serving.launcher_image
  image_pull_secrets  = var.image_pull_secrets
  replicas            = var.serving.replicas
  autoscaling         = var.serving.autoscaling
  service_type        = var.serving.service_type
  service_annotations = var.serving.service_annotations
  cube_conf           = ctr_cube.this.cube_conf
  model_url           = coalesce(var.serving.model_url, "${ctr_training_job.this.file_server_url}/output/ctr_model.tar.gz")
  # The module's default is "none": the pods wait for the first model (a first training pass
  # takes minutes), apply does not.
  wait      = var.serving.wait
  resources = var.serving.requests == null && var.serving.limits == null ? null : { requests = var.serving.requests, limits = var.serving.limits }
  pod       = lookup(var.pods, "serving", null)
}
