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
  description = "The worker instance group: machine spec (e.g. bcc.g5.c8m32), count, and how the machines are made. replicas, labels, taints and root_disk_size change in place; the rest creates a new cluster."
  type = object({
    machine_spec      = optional(string, "bcc.g5.c8m32")
    replicas          = optional(number, 3)
    name              = optional(string, "workers") # the instance group's name
    instance_type     = optional(string)            # BCC instance type, e.g. N5
    zone              = optional(string)            # availability zone, e.g. zoneA
    security_group_id = optional(string)
    image_id          = optional(string)      # OS image; default: CCE's
    root_disk_size    = optional(number, 100) # GB
    ssh_key_id        = optional(string)
    labels            = optional(map(string)) # Kubernetes labels of the nodes
    taints = optional(list(object({           # Kubernetes taints of the nodes
      key    = string
      value  = optional(string)
      effect = string # NoSchedule, PreferNoSchedule or NoExecute
    })))
  })
  default  = {}
  nullable = false
  validation {
    condition     = var.workers.replicas >= 1
    error_message = "workers.replicas must be at least 1."
  }
}

variable "cluster" {
  description = "The CCE cluster's own settings, each left to CCE's (or the provider's) default when unset; CCE judges the values at apply. Every one but delete_resource and delete_cds_snapshot creates a new cluster when changed."
  type = object({
    description     = optional(string)
    runtime         = optional(string, "containerd")
    runtime_version = optional(string)
    network_mode    = optional(string) # e.g. vpc-eni or vpc-route-auto-detect
    pod_cidr        = optional(string) # route modes
    service_cidr    = optional(string)
    master = optional(object({ # the managed master
      type      = optional(string, "managedPro")
      flavor    = optional(string, "l50") # the cluster's size class
      zone      = optional(string)
      subnet_id = optional(string) # of the API server's load balancer
    }), {})
    delete_resource     = optional(bool, true) # on destroy, release the worker machines too
    delete_cds_snapshot = optional(bool, true) # on destroy, delete the machines' disk snapshots
  })
  default  = {}
  nullable = false
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

variable "volcano_version" {
  description = "Volcano release to install (and upgrade to when changed)."
  type        = string
  default     = "v1.14.1"
}

variable "volcano_keep_on_destroy" {
  description = "Leave Volcano on the cluster when ctr_cluster is destroyed."
  type        = bool
  default     = false
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

# The stack's settings, passed to the elastic-ctr module as they are: their attributes, types,
# defaults and checks are that module's (see its variables.tf and README), declared there
# only, and apply to whatever is left unset here. provider/modules_test.go checks that every
# variable of elastic-ctr is passed on, with the same default.

variable "image_pull_secrets" {
  description = "Secrets every pod of the stack pulls its images with; see the elastic-ctr module's variable of the same name. Null: none."
  type        = any
  default     = null
}

variable "pods" {
  description = "Pod settings by component (training, file_server, cube, serving); see the elastic-ctr module's variable of the same name."
  type        = any
  default     = {}
}

variable "training" {
  description = "Training job; see the elastic-ctr module's variable of the same name."
  type        = any
  default     = {}
}

variable "file_server" {
  description = "The training job's file server; see the elastic-ctr module's variable of the same name."
  type        = any
  default     = {}
}

variable "dataset" {
  description = "Where the trainers read samples; see the elastic-ctr module's variable of the same name. Null: none."
  type        = any
  default     = null
}

variable "hdfs_ugi" {
  description = "HDFS user and password of dataset, \"user,password\"; see the elastic-ctr module's variable of the same name. Null: none."
  type        = any
  default     = null
  sensitive   = true
}

variable "model_output" {
  description = "The model-output volume; see the elastic-ctr module's variable of the same name."
  type        = any
  default     = {}
}

variable "model_export" {
  description = "The model-output step; see the elastic-ctr module's variable of the same name. Null: none."
  type        = any
  default     = {}
}

variable "cube" {
  description = "Cube; see the elastic-ctr module's variable of the same name."
  type        = any
  default     = {}
}

variable "serving" {
  description = "Paddle Serving; see the elastic-ctr module's variable of the same name."
  type        = any
  default     = {}
}
