variable "project" {
  description = "Google Cloud project."
  type        = string
}

variable "region" {
  description = "Region of the (regional) cluster."
  type        = string
  default     = "us-central1"
}

variable "name" {
  description = "Name of the GKE cluster and prefix of every workload."
  type        = string
  default     = "ctr"
}

variable "machine_type" {
  description = "Machine type of the workers."
  type        = string
  default     = "n2-standard-8"
}

variable "workers_per_zone" {
  description = "Worker nodes in each of the region's zones."
  type        = number
  default     = 1
}

variable "namespace" {
  description = "Namespace of the stack, created by the apply (it must not exist)."
  type        = string
  default     = "ctr"
}
