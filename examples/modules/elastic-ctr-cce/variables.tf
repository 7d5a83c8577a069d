variable "name" {
  description = "Name of the CCE cluster and prefix of every workload."
  type        = string
  default     = "ctr"
}

variable "k8s_version" {
  description = "Kubernetes version of the CCE cluster, e.g. 1.34.2 (CCE judges which are offered)."
  type        = string
  default     = "1.34.2"
}

variable "vpc_id" {
  description = "VPC of the cluster."
  type        = string
}

variable "subnet_id" {
  description = "Subnet of the worker machines."
  type        = string
}

variable "workers" {
  description = "Worker pool: machine spec (e.g. bcc.g5.c8m32) and count."
  type = object({
    machine_spec = optional(string, "bcc.g5.c8m32")
    replicas     = optional(number, 3)
  })
  default = {}
  validation {
    condition     = var.workers.replicas >= 1
    error_message = "workers.replicas must be at least 1."
  }
}

variable "admin_password" {
  description = "Root password of the worker machines (write-only: never stored in state)."
  type        = string
  sensitive   = true
  default     = null
}

variable "volcano_mode" {
  description = "What ctr_cluster does with Volcano: if_absent installs it unless the cluster has one (which is left alone), adopt takes an existing install over, none manages nothing."
  type        = string
  default     = "if_absent"
  validation {
    condition     = contains(["if_absent", "adopt", "none"], var.volcano_mode)
    error_message = "volcano_mode must be if_absent, adopt or none."
  }
}

variable "volcano_manifest_url" {
  description = "Mirror of Volcano's release manifest; null fetches the release's own."
  type        = string
  default     = null
}

variable "public_endpoint" {
  description = "Give the API server a public address and export a kubeconfig that uses it, so that Terraform can run outside the cluster's VPC. False: the VPC address (Terraform must run inside the VPC)."
  type        = bool
  default     = false
}

variable "namespace" {
  description = "Namespace of the whole stack; it must exist unless create_namespace is true."
  type        = string
  default     = "default"
}

variable "create_namespace" {
  description = "Create the namespace on the new cluster (and delete it on destroy)."
  type        = bool
  default     = false
}

# The stack's settings, passed to the elastic-ctr module as they are: the attributes and their
# meaning are that module's (see its variables.tf and README), and so are the defaults, which
# apply to whatever is left unset here.

variable "training" {
  description = "Training job; see the elastic-ctr module's variable of the same name."
  type = object({
    image    = optional(string)
    entry    = optional(string)
    mode     = optional(string)
    pservers = optional(number)
    trainers = optional(number)
    workers  = optional(number)
    gpus     = optional(number)
    requests = optional(map(string))
    limits   = optional(map(string))
  })
  default = {}
}

variable "dataset" {
  description = "ElasticCTR's data.config; see the elastic-ctr module's variable of the same name. Null: none."
  type = object({
    hdfs_address = string
    hdfs_ugi     = optional(string)
    path         = string
    start_hour   = string
    end_hour     = string
    sparse_dim   = optional(number)
  })
  default   = null
  sensitive = true
}

variable "model_output" {
  description = "The model-output volume; see the elastic-ctr module's variable of the same name."
  type = object({
    size          = optional(string)
    storage_class = optional(string)
    access_mode   = optional(string)
  })
  default = {}
}

variable "model_export" {
  description = "The model-output step; see the elastic-ctr module's variable of the same name. Null: none."
  type = object({
    format           = optional(string)
    path             = optional(string)
    var              = optional(string)
    embedx_dim       = optional(number)
    interval_seconds = optional(number)
  })
  default = {}
}

variable "cube" {
  description = "Cube; see the elastic-ctr module's variable of the same name."
  type = object({
    shards   = optional(number)
    replicas = optional(number)
    image    = optional(string)
    mode     = optional(string)
    requests = optional(map(string))
    limits   = optional(map(string))
    storage = optional(object({
      size          = optional(string)
      storage_class = optional(string)
    }))
  })
  default = {}
}

variable "serving" {
  description = "Paddle Serving; see the elastic-ctr module's variable of the same name."
  type = object({
    image        = optional(string)
    model_url    = optional(string)
    wait         = optional(string)
    replicas     = optional(number)
    service_type = optional(string)
    requests     = optional(map(string))
    limits       = optional(map(string))
  })
  default = {}
}
