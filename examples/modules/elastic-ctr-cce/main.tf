# A CCE cluster with Volcano, and the generic elastic-ctr module on it, in one apply. As with
# the kubernetes provider: the cluster is managed through one provider configuration
# (ctr.cluster, with the Baidu Cloud credentials), the workloads through the default one, which
# the caller configures from this module's `kubernetes` output — known only once the cluster
# exists, and read afresh on every run, never stored with the workloads.

resource "ctr_cluster" "this" {
  provider = ctr.cluster
  cce = {
    name            = var.name
    description     = var.cluster.description
    k8s_version     = var.k8s_version
    runtime         = var.cluster.runtime
    runtime_version = var.cluster.runtime_version
    vpc_id          = var.vpc_id
    network_mode    = var.cluster.network_mode
    pod_cidr        = var.cluster.pod_cidr
    service_cidr    = var.cluster.service_cidr
    master = {
      type      = var.cluster.master.type
      flavor    = var.cluster.master.flavor
      zone      = var.cluster.master.zone
      subnet_id = var.cluster.master.subnet_id
      # The exported kubeconfig must reach the API server from where Terraform runs.
      exposed_public = var.public_endpoint
    }
    kubeconfig_type = var.public_endpoint ? "public" : "vpc"
    worker_pool = {
      name              = var.workers.name
      replicas          = var.workers.replicas
      machine_spec      = var.workers.machine_spec
      instance_type     = var.workers.instance_type
      subnet_id         = var.subnet_id
      security_group_id = var.workers.security_group_id
      zone              = var.workers.zone
      root_disk_size    = var.workers.root_disk_size
      image_id          = var.workers.image_id
      labels            = var.workers.labels
      taints            = var.workers.taints
      ssh_key_id        = var.workers.ssh_key_id
      admin_password    = var.admin_password
    }
    delete_resource     = var.cluster.delete_resource
    delete_cds_snapshot = var.cluster.delete_cds_snapshot
  }
  volcano = {
    mode            = var.volcano_mode
    version         = var.volcano_version
    manifest_url    = var.volcano_manifest_url
    keep_on_destroy = var.volcano_keep_on_destroy
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
