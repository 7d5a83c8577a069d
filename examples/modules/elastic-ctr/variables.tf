variable "kubernetes" {
  description = "Connection to the cluster (e.g. ctr_cluster.this.kubernetes). Null uses the provider's default connection."
  type = object({
    config_path            = optional(string)
    config_context         = optional(string)
    host                   = optional(string)
    token                  = optional(string)
    client_certificate     = optional(string)
    client_key             = optional(string)
    cluster_ca_certificate = optional(string)
    insecure               = optional(bool)
  })
  default   = null
  sensitive = true
}

variable "name" {
  description = "Prefix of every resource name."
  type        = string
  default     = "ctr"
  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,22}[a-z0-9])?$", var.name))
    error_message = "name must be 1-24 lowercase letters, digits and '-', starting and ending with a letter or digit."
  }
}

variable "namespace" {
  description = "Namespace of the whole stack; it must exist."
  type        = string
  default     = "default"
}

variable "training" {
  description = "Training job: image, entry, parameter servers, trainers, and resources per pod (Kubernetes quantities)."
  type = object({
    image    = optional(string)
    entry    = optional(string, "cd /workspace/ctr && python train.py --is_local 0 --cloud_train 1")
    pservers = optional(number, 2)
    trainers = optional(number, 2)
    requests = optional(map(string), {})
    limits   = optional(map(string), {})
  })
  default = {}
  validation {
    condition     = var.training.pservers >= 1 && var.training.trainers >= 1
    error_message = "training needs at least one parameter server and one trainer."
  }
}

variable "dataset" {
  description = "ElasticCTR's data.config: HDFS address, UGI (\"user,password\"), path, hour range (YYYYMMDD/HH) and sparse dimension. Null: none."
  type = object({
    hdfs_address = string
    hdfs_ugi     = optional(string)
    path         = string
    start_hour   = string
    end_hour     = string
    sparse_dim   = optional(number, 1000001)
  })
  default   = null
  sensitive = true
}

variable "model_output_size" {
  description = "Size of the model-output volume, e.g. 10Gi."
  type        = string
  default     = "10Gi"
}

variable "cube" {
  description = "Cube: shards, replicas per shard, image (default: the provider's own cube image) and rollout mode (base or base_delta)."
  type = object({
    shards   = optional(number, 2)
    replicas = optional(number, 2)
    image    = optional(string)
    mode     = optional(string, "base")
  })
  default = {}
  validation {
    condition     = var.cube.shards >= 1 && var.cube.replicas >= 1 && contains(["base", "base_delta"], var.cube.mode)
    error_message = "cube needs shards >= 1, replicas >= 1, and mode base or base_delta."
  }
}

variable "serving" {
  description = "Paddle Serving: image, replicas and Service type."
  type = object({
    image        = optional(string)
    replicas     = optional(number, 1)
    service_type = optional(string, "ClusterIP")
  })
  default = {}
  validation {
    condition     = contains(["ClusterIP", "NodePort", "LoadBalancer"], var.serving.service_type)
    error_message = "serving.service_type must be ClusterIP, NodePort or LoadBalancer."
  }
}
