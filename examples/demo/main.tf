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
