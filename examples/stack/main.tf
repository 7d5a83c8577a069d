# The ElasticCTR stack on an existing cluster in one apply: PaddlePaddle training on Volcano,
# whose donefile feeds the cube, whose cube.conf feeds Paddle Serving.
terraform {
  required_providers {
    ctr = {
      source = "elasticctr/ctr"
    }
  }
}

variable "kubeconfig" {
  description = "Kubeconfig of the cluster (its current context is used)."
  type        = string
  default     = "~/.kube/config"
}

# The connection is named, never implicit: without it (or KUBE_CONFIG_PATH) plan refuses to
# guess a cluster.
provider "ctr" {
  kubernetes = {
    config_path = var.kubeconfig
  }
}

variable "namespace" {
  description = "Namespace of the whole stack; it must exist."
  type        = string
  default     = "default"
}

variable "cube_shards" {
  description = "Number of cube shards."
  type        = number
  default     = 2
}

resource "ctr_training_job" "ctr" {
  name      = "ctr-demo"
  namespace = var.namespace
  stack     = "elastic-ctr"
  pserver   = { replicas = 1 }
  trainer   = { replicas = 1 }
  # The default image and entry: EDL's CTR program, its saves (models/pass-<p>) on the model
  # volume; the model export publishes each one as a cube version.
  model_export = {}
}

resource "ctr_cube" "cube" {
  name         = "ctr-cube"
  namespace    = var.namespace
  stack        = "elastic-ctr"
  donefile_url = ctr_training_job.ctr.donefile_url
  shards       = var.cube_shards
  replicas     = 1
}

resource "ctr_serving" "serving" {
  name      = "ctr-serving"
  namespace = var.namespace
  stack     = "elastic-ctr"
  cube_conf = ctr_cube.cube.cube_conf
  model_url = "${ctr_training_job.ctr.file_server_url}/output/ctr_model.tar.gz"
  # The pods wait, not ready, until the trainer publishes the model (a first pass takes
  # minutes); apply does not wait for them.
  wait = "none"
}

output "serving_url" {
  description = "In-cluster URL of Paddle Serving."
  value       = ctr_serving.serving.url
}

output "cube_conf" {
  description = "The cube.conf Paddle Serving reads."
  value       = ctr_cube.cube.cube_conf
}

output "donefile_url" {
  description = "What the cube transfer watches."
  value       = ctr_training_job.ctr.donefile_url
}
