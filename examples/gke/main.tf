# The ElasticCTR stack on a new GKE cluster, in one apply. The ctr provider connects the way
# the kubernetes provider's users know: endpoint and CA from the cluster resource, tokens from
# `gke-gcloud-auth-plugin` (an exec plugin, run whenever a token is needed). Provider
# configuration is never stored in state and is evaluated afresh on every run, so the tokens
# are current at refresh and destroy too, and nothing secret is stored.
# Terraform needs gke-gcloud-auth-plugin on PATH (gcloud components install
# gke-gcloud-auth-plugin) and application-default credentials.
terraform {
  required_version = ">= 1.11"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0"
    }
    ctr = {
      source = "elasticctr/ctr"
    }
  }
}

provider "google" {
  project = var.project
  region  = var.region
}

resource "google_container_cluster" "this" {
  name                     = var.name
  location                 = var.region
  remove_default_node_pool = true
  initial_node_count       = 1
  deletion_protection      = false
}

resource "google_container_node_pool" "workers" {
  name       = "${var.name}-workers"
  cluster    = google_container_cluster.this.id
  node_count = var.workers_per_zone

  node_config {
    machine_type = var.machine_type
  }
}

locals {
  # Nothing secret: the exec plugin fetches the token when the client needs one.
  kubernetes = {
    host                   = "https://${google_container_cluster.this.endpoint}"
    cluster_ca_certificate = base64decode(google_container_cluster.this.master_auth[0].cluster_ca_certificate)
    exec = {
      api_version = "client.authentication.k8s.io/v1beta1"
      command     = "gke-gcloud-auth-plugin"
    }
  }
}

# Known only once the cluster exists: the plan renders the workloads without contacting it.
provider "ctr" {
  kubernetes = local.kubernetes
}

# Volcano on the new cluster. ctr_cluster's own connection is stored in its state: endpoint, CA
# and the exec command, which yields a current token at refresh and destroy.
resource "ctr_cluster" "volcano" {
  kubernetes = local.kubernetes
  depends_on = [google_container_node_pool.workers]
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
