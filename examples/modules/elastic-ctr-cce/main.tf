# A CCE cluster with Volcano, and the generic elastic-ctr module on it, in one apply: the
# module takes the cluster's connection, which is known only after the cluster exists.

resource "ctr_cluster" "this" {
  cce = {
    name        = var.name
    k8s_version = var.k8s_version
    vpc_id      = var.vpc_id
    worker_pool = {
      replicas       = var.workers.replicas
      machine_spec   = var.workers.machine_spec
      subnet_id      = var.subnet_id
      admin_password = var.admin_password
    }
  }
  volcano = {
    manifest_url = var.volcano_manifest_url
  }
}

module "stack" {
  source     = "../elastic-ctr"
  kubernetes = ctr_cluster.this.kubernetes
  name       = var.name
  training   = lookup(var.stack, "training", {})
  dataset    = lookup(var.stack, "dataset", null)
  cube       = lookup(var.stack, "cube", {})
  serving    = lookup(var.stack, "serving", {})

  depends_on = [ctr_cluster.this]
}
