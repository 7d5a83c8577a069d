variable "name" {
  description = "Prefix | of names."
  type        = string
  default     = "x"
}

variable "zone" {
  type = string
}

variable "cube" {
  description = "The cube."
  type = object({
    shards = optional(number, 2) # how many
    spread = optional(object({
      key = optional(string, "kubernetes.io/hostname")
    }))
  })
  default = {}
}

variable "pods" {
  type    = map(object({ labels = optional(map(string)), read_only = optional(bool, false) }))
  default = {}
}

variable "token" {
  type      = string
  default   = null
  sensitive = true
}
