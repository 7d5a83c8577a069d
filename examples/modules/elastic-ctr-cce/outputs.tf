output "cluster_id" {
  description = "CCE cluster ID."
  value       = ctr_cluster.this.cluster_id
}

output "kubernetes" {
  description = "The cluster's connection, for the default ctr provider: provider \"ctr\" { kubernetes = module.NAME.kubernetes }."
  value       = ctr_cluster.this.kubernetes
  sensitive   = true
}

output "kubeconfig" {
  description = "Kubeconfig of the CCE cluster."
  value       = ctr_cluster.this.kubeconfig
  sensitive   = true
}

output "serving_url" {
  description = "In-cluster URL of Paddle Serving."
  value       = module.stack.serving_url
}

output "cube_conf" {
  description = "The cube.conf Paddle Serving reads."
  value       = module.stack.cube_conf
}

output "file_server_url" {
  description = "In-cluster URL of the training job's file server."
  value       = module.stack.file_server_url
}
