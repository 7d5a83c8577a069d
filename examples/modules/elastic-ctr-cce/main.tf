# A CCE cluster with Volcano, and the generic elastic-ctr module on it, in one apply. As with
# the kubernetes provider: the cluster is managed through one provider configuration
# (ctr.cluster, with the Baidu Cloud credentials), the workloads through the default one, which
# the caller configures from this module's `kubernetes` output — known only once the cluster
# exists, and read afresh on every run, never stored with the workloads.

resource "ctr_cluster" "this" {
  provider = ctr.cluster
  cce = {
    name        = var.name
    k8s_version = var.k8s_version
    vpc_id      = var.vpc_id
    # The exported kubeconfig must reach the API server from where Terraform runs.
    master          = { exposed_public = var.public_endpoint }
    kubeconfig_type = var.public_endpoint ? "public" : "vpc"
    worker_pool = {
      replicas       = var.workers.replicas
      machine_spec   = var.workers.machine_spec
      subnet_id      = var.subnet_id
      admin_password = var.admin_password
    }
  }
  volcano = {
    mode         = var.volcano_mode
    manifest_url = var.volcano_manifest_url
  }
}

module "stack" {
  source             = "../elastic-ctr"
  name               = var.name
  namespace          = var.namespace
  create_namespace   = var.create_namespace
  image_pull_secrets = var.image_pull_secrets
  pods               = var.pods
  training           = var.training
  file_server        = var.file_server
  dataset            = var.dataset
  hdfs_ugi           = var.hdfs_ugi
  model_output       = var.model_output
  model_export       = var.model_export
  cube               = var.cube
  serving            = var.serving

  depends_on = [ctr_cluster.this]
}
