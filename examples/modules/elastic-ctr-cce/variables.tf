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

variable "volcano_manifest_url" {
  description = "Mirror of Volcano's release manifest; null fetches the release's own."
  type        = string
  default     = null
}

variable "stack" {
  description = "Settings passed to the elastic-ctr module (training, dataset, cube, serving); see its variables."
  type        = any
  default     = {}
}
