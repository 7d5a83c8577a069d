# A CCE cluster with a worker pool and Volcano, managed through its own provider
# configuration; the default one takes the new cluster's connection for the workloads of the
# same apply.
provider "ctr" {
  alias = "cloud" # Baidu Cloud credentials from BCE_ACCESS_KEY_ID / BCE_SECRET_ACCESS_KEY
}

provider "ctr" {
  kubernetes = ctr_cluster.this.kubernetes
}

resource "ctr_cluster" "this" {
  provider = ctr.cloud
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

# Any existing cluster (EKS, GKE, kind, on-prem): only Volcano is managed. Its own connection
# is stored in state, so it takes a kubeconfig or an exec plugin, not a static token. A Volcano
# the cluster already has is left alone (volcano_state = "existing"); mode = "adopt" would take
# it over, mode = "none" manages no Volcano at all.
resource "ctr_cluster" "existing" {
  provider = ctr.cloud
  kubernetes = {
    config_path = "~/.kube/config"
  }
  volcano = {
    mode            = "if_absent"
    keep_on_destroy = true
  }
}

resource "ctr_training_job" "ctr" {
  name = "ctr-demo"
}
