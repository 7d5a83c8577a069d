# The ElasticCTR stack on a new Baidu Cloud CCE cluster, in one apply, from a machine outside
# the cluster's VPC (a laptop, a CI runner): the API server gets a public address and the
# exported kubeconfig uses it.
#
# Two configurations of the ctr provider, as with the kubernetes provider: `ctr.cluster`
# manages the cluster with the Baidu Cloud credentials (BCE_ACCESS_KEY_ID and
# BCE_SECRET_ACCESS_KEY), the default one connects the workloads to the new cluster. Its
# connection (the kubeconfig's certificate) is stored only in ctr_cluster's state; the
# workloads' state holds none of it, and every run reads it afresh from there.
terraform {
  required_version = ">= 1.11"
  required_providers {
    ctr = {
      source = "elasticctr/ctr"
    }
  }
}

variable "vpc_id" {
  description = "VPC of the cluster."
  type        = string
}

variable "subnet_id" {
  description = "Subnet of the workers."
  type        = string
}

variable "admin_password" {
  description = "Root password of the workers (write-only: never stored in state)."
  type        = string
  sensitive   = true
  default     = null
}

provider "ctr" {
  alias  = "cluster"
  region = "bj"
}

provider "ctr" {
  kubernetes = module.ctr.kubernetes
}

module "ctr" {
  source = "../modules/elastic-ctr-cce"
  providers = {
    ctr         = ctr
    ctr.cluster = ctr.cluster
  }

  name             = "ads"
  vpc_id           = var.vpc_id
  subnet_id        = var.subnet_id
  workers          = { machine_spec = "bcc.g5.c8m32", replicas = 4 }
  admin_password   = var.admin_password
  public_endpoint  = true # Terraform runs outside the VPC
  namespace        = "ads"
  create_namespace = true
  training         = { pservers = 2, trainers = 4 }
  cube             = { shards = 4 }
}

output "serving_url" {
  value = module.ctr.serving_url
}
