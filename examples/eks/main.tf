# The ElasticCTR stack on a new EKS cluster, in one apply. The ctr provider connects the way
# the kubernetes provider's users know: host and CA from the cluster resource, a short-lived
# token from `aws eks get-token` (an exec plugin, run whenever a token is needed). Provider
# configuration is never stored in state and is evaluated afresh on every run, so the tokens
# (valid 15 minutes) are current at refresh and destroy too, and nothing secret is stored.
# Terraform needs the aws CLI on PATH and credentials allowed to administer the cluster.
terraform {
  required_version = ">= 1.11"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.0"
    }
    ctr = {
      source = "elasticctr/ctr"
    }
  }
}

provider "aws" {
  region = var.region
}

resource "aws_eks_cluster" "this" {
  name     = var.name
  role_arn = var.cluster_role_arn
  version  = var.kubernetes_version

  vpc_config {
    subnet_ids = var.subnet_ids
  }

  # Whoever creates the cluster administers it: the same identity `aws eks get-token` uses.
  access_config {
    authentication_mode                         = "API"
    bootstrap_cluster_creator_admin_permissions = true
  }
}

resource "aws_eks_node_group" "workers" {
  cluster_name    = aws_eks_cluster.this.name
  node_group_name = "${var.name}-workers"
  node_role_arn   = var.node_role_arn
  subnet_ids      = var.subnet_ids
  instance_types  = [var.instance_type]

  scaling_config {
    desired_size = var.workers
    min_size     = var.workers
    max_size     = var.workers
  }
}

locals {
  # Nothing secret: the exec plugin fetches the token when the client needs one.
  kubernetes = {
    host                   = aws_eks_cluster.this.endpoint
    cluster_ca_certificate = base64decode(aws_eks_cluster.this.certificate_authority[0].data)
    exec = {
      api_version = "client.authentication.k8s.io/v1beta1"
      command     = "aws"
      args        = ["eks", "get-token", "--cluster-name", aws_eks_cluster.this.name, "--region", var.region]
    }
  }
}

# Known only once the cluster exists: the plan renders the workloads without contacting it.
provider "ctr" {
  kubernetes = local.kubernetes
}

# Volcano on the new cluster. ctr_cluster's own connection is stored in its state: host, CA and
# the exec command, which yields a current token at refresh and destroy.
resource "ctr_cluster" "volcano" {
  kubernetes = local.kubernetes
  depends_on = [aws_eks_node_group.workers]
}

module "stack" {
  source           = "../modules/elastic-ctr"
  name             = var.name
  namespace        = var.namespace
  create_namespace = true # the stack's own namespace on the new cluster
  training         = { pservers = 2, trainers = 2 }
  cube             = { shards = 2, replicas = 2 }
  serving          = { service_type = "LoadBalancer" }

  depends_on = [ctr_cluster.volcano]
}

output "serving_url" {
  value = module.stack.serving_url
}
