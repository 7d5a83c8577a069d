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
  description = "Namespace of the whole stack; it must exist unless create_namespace is true."
  type        = string
  default     = "default"
}

variable "create_namespace" {
  description = "Create the namespace (ctr_namespace) and delete it on destroy. A namespace that exists already is refused, never taken over."
  type        = bool
  default     = false
}

variable "training" {
  description = "Training job: image, entry (default: the default image's EDL program; required with an image of your own), mode (ps: parameter servers and trainers; collective: GPU workers), pod counts, GPUs per trainer or worker, and resources per pod (Kubernetes quantities)."
  type = object({
    image    = optional(string)
    entry    = optional(string)
    mode     = optional(string, "ps")
    pservers = optional(number, 2)
    trainers = optional(number, 2)
    workers  = optional(number, 2)
    gpus     = optional(number, 0)
    requests = optional(map(string), {})
    limits   = optional(map(string), {})
  })
  default = {}
  validation {
    condition     = contains(["ps", "collective"], var.training.mode)
    error_message = "training.mode must be ps or collective."
  }
  validation {
    condition     = var.training.mode == "collective" ? var.training.workers >= 1 : (var.training.pservers >= 1 && var.training.trainers >= 1)
    error_message = "training needs at least one parameter server and one trainer (mode ps), or one worker (mode collective)."
  }
  validation {
    condition     = var.training.gpus >= 0 && floor(var.training.gpus) == var.training.gpus
    error_message = "training.gpus must be a whole number, 0 or more."
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

variable "model_output" {
  description = "The model-output volume: size, StorageClass (null: the cluster's default) and access mode. ReadWriteOnce keeps trainers beside the file server; ReadWriteMany (e.g. CFS on CCE) lets them spread."
  type = object({
    size          = optional(string, "10Gi")
    storage_class = optional(string)
    access_mode   = optional(string, "ReadWriteOnce")
  })
  default = {}
  validation {
    condition     = contains(["ReadWriteOnce", "ReadWriteMany"], var.model_output.access_mode)
    error_message = "model_output.access_mode must be ReadWriteOnce or ReadWriteMany."
  }
}

variable "cube" {
  description = "Cube: shards, replicas per shard, image (default: the provider's own cube image), rollout mode (base or base_delta), resources per pod, and the replicas' storage (null: an emptyDir; the transfer heals a replica that comes back empty)."
  type = object({
    shards   = optional(number, 2)
    replicas = optional(number, 2)
    image    = optional(string)
    mode     = optional(string, "base")
    requests = optional(map(string))
    limits   = optional(map(string))
    storage = optional(object({
      size          = optional(string, "10Gi")
      storage_class = optional(string)
    }))
  })
  default = {}
  validation {
    condition     = var.cube.shards >= 1 && var.cube.replicas >= 1 && contains(["base", "base_delta"], var.cube.mode)
    error_message = "cube needs shards >= 1, replicas >= 1, and mode base or base_delta."
  }
}

variable "serving" {
  description = "Paddle Serving: image, where its dense model is fetched from (MODEL_URL; null: ctr_model.tar.gz on the training job's file server), how far apply waits (wait: \"none\", the default, or \"available\"), replicas, Service type and resources per pod."
  type = object({
    image        = optional(string)
    model_url    = optional(string)
    wait         = optional(string, "none")
    replicas     = optional(number, 1)
    service_type = optional(string, "ClusterIP")
    requests     = optional(map(string))
    limits       = optional(map(string))
  })
  default = {}
  validation {
    condition     = contains(["ClusterIP", "NodePort", "LoadBalancer"], var.serving.service_type)
    error_message = "serving.service_type must be ClusterIP, NodePort or LoadBalancer."
  }
}

variable "model_export" {
  description = "The model-output step (ctr_training_job.model_export): format (lodtensor, combined, selectedrows, ps-table), path, var, embedx_dim, interval_seconds. The default publishes each save the default image's EDL program makes; null leaves it out, for a trainer that writes the cube's input itself."
  type = object({
    format           = optional(string)
    path             = optional(string)
    var              = optional(string)
    embedx_dim       = optional(number)
    interval_seconds = optional(number)
  })
  default = {}
}
