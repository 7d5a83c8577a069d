terraform {
  required_providers {
    ctr = {
      source = "elasticctr/ctr"
    }
  }
}

# The connection of every resource, named explicitly: ctr never falls back to KUBECONFIG or
# ~/.kube/config (KUBE_CONFIG_PATH and the other KUBE_* variables fill unset attributes).
# Never stored in state: evaluated afresh on every run.
# Baidu Cloud credentials (for ctr_cluster) come from BCE_ACCESS_KEY_ID and
# BCE_SECRET_ACCESS_KEY when not set here.
provider "ctr" {
  region = "bj"

  # Every default image (training, cube, file server, Paddle Serving, Volcano) from a mirror;
  # pods pull with each resource's image_pull_secrets.
  image_registry = "registry.example.com:5000"

  kubernetes = {
    config_path    = "~/.kube/config"
    config_context = "prod"
  }
}

# Or an API server and an exec credential plugin that prints a short-lived token whenever
# one is needed (here EKS's), in a second provider configuration for another cluster.
provider "ctr" {
  alias = "eks"

  kubernetes = {
    host                   = "https://ABCDEF0123456789.gr7.us-east-1.eks.amazonaws.com"
    cluster_ca_certificate = var.eks_cluster_ca # PEM
    exec = {
      api_version = "client.authentication.k8s.io/v1beta1"
      command     = "aws"
      args        = ["eks", "get-token", "--cluster-name", "ctr"]
    }
  }
}

variable "eks_cluster_ca" {
  description = "PEM certificate authority of the EKS cluster's API server."
  type        = string
  default     = null
}
