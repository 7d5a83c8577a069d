# A CCE cluster with a worker pool and Volcano, whose connection feeds the workloads of the
# same apply.
resource "ctr_cluster" "this" {
  cce = {
    name         = "elastic-ctr"
    k8s_version  = "1.34.2"
    vpc_id       = "vpc-xxxxxxxx"
    network_mode = "vpc-route-auto-detect"
    pod_cidr     = "172.28.0.0/16"
    service_cidr = "172.31.0.0/16"
    master = {
      flavor = "l50"
    }
    worker_pool = {
      replicas       = 3
      machine_spec   = "bcc.g5.c8m32"
      subnet_id      = "sbn-xxxxxxxx"
      admin_password = var.admin_password # write-only: never stored in state
      labels         = { "ctr.elasticctr.io/pool" = "training" }
    }
  }

  volcano = {
    version = "v1.14.1"
  }
}

variable "admin_password" {
  type      = string
  sensitive = true
}

# Any existing cluster (EKS, GKE, kind, on-prem): only Volcano is managed.
resource "ctr_cluster" "existing" {
  kubernetes = {
    config_path = "~/.kube/config"
  }
  volcano = {
    keep_on_destroy = true
  }
}

resource "ctr_training_job" "ctr" {
  kubernetes = ctr_cluster.this.kubernetes
  name       = "ctr-demo"
}
