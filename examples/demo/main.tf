# The demo (`make demo`): the whole stack in one apply through the elastic-ctr-cce module —
# a CCE cluster (here the local CCE emulator, whose clusters are the local control plane),
# Volcano, the training job, the cube and Paddle Serving.
terraform {
  required_providers {
    ctr = {
      source = "elasticctr/ctr"
    }
  }
}

variable "cce_endpoint" {
  description = "CCE API endpoint (the emulator's URL in the demo)."
  type        = string
}

variable "volcano_manifest_url" {
  description = "Volcano release manifest (the local control plane's own copy in the demo)."
  type        = string
}

variable "cube_shards" {
  description = "Number of cube shards."
  type        = number
  default     = 2
}

# The cluster's provider configuration: CCE credentials and endpoint.
provider "ctr" {
  alias = "cluster"
  # The emulator's demo credentials; real ones come from BCE_ACCESS_KEY_ID / BCE_SECRET_ACCESS_KEY.
  access_key        = "AKDEMO0000000001"
  secret_key        = "demo-secret-key"
  cce_endpoint      = var.cce_endpoint
  cce_poll_interval = "500ms"
}

# The workloads' provider configuration: the connection of the cluster created in this apply.
provider "ctr" {
  kubernetes = module.ctr.kubernetes
}

module "ctr" {
  source = "../modules/elastic-ctr-cce"
  providers = {
    ctr         = ctr
    ctr.cluster = ctr.cluster
  }

  name                 = "demo"
  vpc_id               = "vpc-demo"
  subnet_id            = "sbn-demo"
  workers              = { replicas = 2 }
  admin_password       = "Demo-Passw0rd"
  volcano_manifest_url = var.volcano_manifest_url
  volcano_mode         = "adopt" # the emulated cluster is the local control plane, which has Volcano's CRDs: take them over
  training             = { pservers = 1, trainers = 1 }
  cube                 = { shards = var.cube_shards, replicas = 1 }
}

output "cluster_id" {
  value = module.ctr.cluster_id
}

output "cube_conf" {
  value = module.ctr.cube_conf
}

output "serving_url" {
  value = module.ctr.serving_url
}

# The cube for real: on a cluster with a node that runs this repository's image (make demo's
# local cluster has one), a stand-in trainer (`cube model`) writes a synthetic model into a
# training job's volume, and a cube of 2 replicas per shard serves it in pods. Paddle's images
# cannot run on that machine, so the Paddle training and Serving above stay simulated.
variable "real_node_image" {
  description = "This repository's cube image, present on a node that runs it; \"\" leaves the real cube out."
  type        = string
  default     = ""
}

variable "real_node_namespace_annotations" {
  description = "Annotations of the real cube's namespace that place its pods on that node (node selector and toleration admission plugins)."
  type        = map(string)
  default     = {}
}

variable "model_generation" {
  description = "Generation (1-255) of the stand-in trainer's model; changing it trains and rolls out a new version."
  type        = number
  default     = 1
}

locals {
  real = var.real_node_image == "" ? 0 : 1
}

resource "ctr_namespace" "real" {
  count       = local.real
  name        = "ctr-real"
  annotations = var.real_node_namespace_annotations
}

resource "ctr_training_job" "standin" {
  count             = local.real
  name              = "standin"
  namespace         = ctr_namespace.real[0].name
  mode              = "collective"
  image             = var.real_node_image
  image_pull_policy = "IfNotPresent"
  command           = ["/cube", "model", "--out", "/data", "--keys", "100000", "--id", tostring(1000 * var.model_generation), "--gen", tostring(var.model_generation)]
  worker            = { replicas = 1 }
  model_output      = { size = "1Gi", mount_path = "/data", donefile_path = "donefile/base.txt" }
  file_server       = { image = var.real_node_image }
}

resource "ctr_cube" "real" {
  count        = local.real
  name         = "real-cube"
  namespace    = ctr_namespace.real[0].name
  image        = var.real_node_image
  donefile_url = ctr_training_job.standin[0].donefile_url
  shards       = var.cube_shards
  replicas     = 2
}

output "real_cube_conf" {
  value = local.real == 1 ? ctr_cube.real[0].cube_conf : ""
}
