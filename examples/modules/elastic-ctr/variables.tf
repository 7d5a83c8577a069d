# The module's inputs. An attribute passed to the provider has the provider's default, or none
# when the provider's depends on other settings (its page under docs/resources/ says which);
# provider/modules_test.go checks both against the provider's schemas, and that every setting
# the provider offers is here or named there with the reason it is not. The README's inputs are
# generated from this file (make generate): the comments in a type are its attributes' docs.

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

variable "image_pull_secrets" {
  description = "Names of kubernetes.io/dockerconfigjson Secrets in the namespace that every pod of the stack pulls its images with (a private registry, or the mirror of the provider's image_registry). Null: none."
  type        = list(string)
  default     = null
}

variable "pods" {
  description = "Pod settings (the provider's pod block) by component: training (parameter servers, trainers, workers), file_server, cube (cube servers and transfer), serving. Scheduling, ServiceAccounts, extra labels, environment (plain, or from Secrets), volumes and security context; see the pod attribute on each resource's page."
  type = map(object({
    node_selector = optional(map(string))
    tolerations = optional(list(object({
      key      = optional(string)
      operator = optional(string) # Equal (default) or Exists
      value    = optional(string)
      effect   = optional(string) # NoSchedule, PreferNoSchedule or NoExecute; every effect when unset
    })))
    affinity = optional(object({
      node = optional(object({
        required = optional(list(object({ # terms of which a node must match one
          match_expressions = list(object({ key = string, operator = string, values = optional(list(string)) }))
        })))
        preferred = optional(list(object({ # weighted terms the scheduler prefers
          weight            = number       # 1 to 100
          match_expressions = list(object({ key = string, operator = string, values = optional(list(string)) }))
        })))
      }))
    }))
    service_account_name        = optional(string)      # an existing ServiceAccount to run as
    service_account_annotations = optional(map(string)) # of the ServiceAccount ctr creates (IRSA, Workload Identity)
    labels                      = optional(map(string))
    annotations                 = optional(map(string))
    priority_class_name         = optional(string)
    env                         = optional(map(string)) # plain values: they show in the plan
    secret_env = optional(map(object({                  # variable name -> a key of a Secret in the namespace
      secret = string
      key    = string
    })))
    env_from = optional(list(object({ # every key of a Secret or a ConfigMap
      secret     = optional(string)
      config_map = optional(string)
      prefix     = optional(string)
    })))
    volumes = optional(list(object({ # each with exactly one source
      name                    = string
      persistent_volume_claim = optional(object({ claim_name = string, read_only = optional(bool, false) }))
      secret                  = optional(object({ name = string }))
      config_map              = optional(object({ name = string }))
      csi = optional(object({
        driver              = string
        read_only           = optional(bool, false)
        volume_attributes   = optional(map(string))
        node_publish_secret = optional(string)
      }))
      empty_dir = optional(object({ medium = optional(string), size_limit = optional(string) }))
    })))
    volume_mounts = optional(list(object({
      name       = string
      mount_path = string
      sub_path   = optional(string)
      read_only  = optional(bool, false)
    })))
    security_context = optional(object({ # relaxes (or tightens) the hardened defaults
      run_as_user                = optional(number)
      run_as_group               = optional(number)
      fs_group                   = optional(number)
      run_as_non_root            = optional(bool)
      read_only_root_filesystem  = optional(bool)
      allow_privilege_escalation = optional(bool)
      seccomp_profile            = optional(string)
      add_capabilities           = optional(list(string))
    }))
  }))
  default  = {}
  nullable = false
  validation {
    condition     = alltrue([for k in keys(var.pods) : contains(["training", "file_server", "cube", "serving"], k)])
    error_message = "pods takes the keys training, file_server, cube and serving."
  }
}

variable "training" {
  description = "The training job (ctr_training_job): what it runs, its pods, the Volcano job's settings, and how far apply waits."
  type = object({
    recipe            = optional(string) # the training image's recipe (edl, fleet-ctr, paddlerec): sets the default image and entry
    image             = optional(string) # default: the recipe's image
    image_pull_policy = optional(string, "IfNotPresent")
    command           = optional(list(string)) # default: paddle_k8s start_fluid, which runs entry in each pod's role
    entry             = optional(string)       # default: the recipe's; required with an image of your own
    mode              = optional(string, "ps") # ps: parameter servers and trainers; collective: GPU workers
    pservers          = optional(number, 2)    # mode ps
    trainers          = optional(number, 2)    # mode ps
    workers           = optional(number, 2)    # mode collective
    gpus              = optional(number)       # per trainer (ps) or worker (collective), never per parameter server
    requests          = optional(map(string), {})
    limits            = optional(map(string), {})
    queue             = optional(string, "default") # the Volcano queue; it must exist
    min_available     = optional(number)            # gang size; default: every pod of the job
    max_retry         = optional(number, 3)
    ttl_after_finish  = optional(number)            # seconds after it finished until Volcano deletes the Volcano Job; default: never
    slot_config       = optional(string)            # slot.conf's content, one slot id per line (ElasticCTR's -s)
    wait              = optional(string, "running") # none, submitted, running or completed
  })
  default  = {}
  nullable = false
  validation {
    condition     = contains(["ps", "collective"], var.training.mode)
    error_message = "training.mode must be ps or collective."
  }
  validation {
    condition     = var.training.mode == "collective" ? var.training.workers >= 1 : (var.training.pservers >= 1 && var.training.trainers >= 1)
    error_message = "training needs at least one parameter server and one trainer (mode ps), or one worker (mode collective)."
  }
  validation {
    condition     = var.training.gpus == null || try(var.training.gpus >= 0 && floor(var.training.gpus) == var.training.gpus, false)
    error_message = "training.gpus must be a whole number, 0 or more."
  }
}

variable "file_server" {
  description = "The training job's file server, which publishes the model output to the cube's transfer and to serving."
  type = object({
    image        = optional(string) # default: the cube image of the provider's version
    replicas     = optional(number, 1)
    service_type = optional(string, "ClusterIP")
    requests     = optional(map(string)) # over the provider's defaults, key by key
    limits       = optional(map(string)) # over the provider's defaults, key by key
  })
  default  = {}
  nullable = false
}

variable "dataset" {
  description = "Where the trainers read samples, ElasticCTR's data.config: on HDFS (hdfs_address, with hdfs_ugi), in an S3-compatible bucket (s3) or on a volume (volume); at most one. Null: none. Not sensitive: its credentials are hdfs_ugi, or a Secret that s3 names."
  type = object({
    hdfs_address = optional(string) # hdfs://HOST:PORT
    path         = optional(string) # the samples' absolute path in the source
    start_hour   = optional(string) # YYYYMMDD/HH
    end_hour     = optional(string) # YYYYMMDD/HH
    sparse_dim   = optional(number, 1000001)
    s3 = optional(object({
      bucket             = string
      endpoint           = optional(string) # https://HOST[:PORT]; default: AWS's
      region             = optional(string)
      credentials_secret = optional(string) # a Secret with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
    }))
    volume = optional(object({
      claim_name = string
      mount_path = optional(string) # default: /dataset
    }))
  })
  default = null
}

variable "hdfs_ugi" {
  description = "HDFS user and password of dataset, \"user,password\". Kept in a Secret, never shown in a plan. Null: none."
  type        = string
  default     = null
  sensitive   = true
  validation {
    condition     = var.hdfs_ugi == null || var.dataset != null
    error_message = "hdfs_ugi is the credential of dataset: set dataset too."
  }
}

variable "model_output" {
  description = "The model-output volume. ReadWriteOnce keeps trainers beside the file server; ReadWriteMany (e.g. CFS on CCE) lets them spread."
  type = object({
    size           = optional(string, "10Gi")
    storage_class  = optional(string) # default: the cluster's default StorageClass
    access_mode    = optional(string, "ReadWriteOnce")
    existing_claim = optional(string)     # use this claim instead of creating one
    retain         = optional(bool, true) # keep the claim ctr creates when the job is destroyed or replaced
  })
  default  = {}
  nullable = false
  validation {
    condition     = contains(["ReadWriteOnce", "ReadWriteMany"], var.model_output.access_mode)
    error_message = "model_output.access_mode must be ReadWriteOnce or ReadWriteMany."
  }
}

variable "model_export" {
  description = "The model-output step (ctr_training_job's model_export): it publishes each save the trainers make as a cube version. The default suits the default image's EDL program; null leaves it out, for a trainer that writes the cube's input itself."
  type = object({
    format           = optional(string, "lodtensor") # lodtensor, combined, selectedrows or ps-table
    path             = optional(string, "models")    # the trainers' saves, relative to the model output
    var              = optional(string)              # the embedding variable; default: SparseFeatFactors
    embedx_dim       = optional(number)              # ps-table with part-* shards only
    interval_seconds = optional(number, 10)
    serving_model    = optional(string) # a folder of each save with the serving model, published with the version
    resources = optional(object({       # over the provider's defaults, key by key
      requests = optional(map(string))
      limits   = optional(map(string))
    }))
  })
  default = {}
}

variable "cube" {
  description = "The cube (ctr_cube): shards, replicas per shard, image, rollout mode, resources, storage, how replicas spread, who may reach it, and how Prometheus scrapes it."
  type = object({
    shards            = optional(number, 2)
    replicas          = optional(number, 2)
    image             = optional(string)         # default: the cube image of the provider's version
    mode              = optional(string, "base") # base, or base_delta to roll patches out too
    serve_version     = optional(string)         # pins a kept version: a rollback that holds
    requests          = optional(map(string))
    limits            = optional(map(string))
    disruption_budget = optional(bool, true) # a PodDisruptionBudget per shard
    spread = optional(object({               # null: a preference to spread each shard's replicas over nodes
      topology_key = optional(string, "kubernetes.io/hostname")
      required     = optional(bool, false)
    }))
    network_policy = optional(object({ # null: policies with no extra peers
      enabled = optional(bool, true)
      allow_from = optional(list(object({
        namespace_labels = optional(map(string))
        pod_labels       = optional(map(string))
      })))
    }))
    storage = optional(object({ # null: an emptyDir, which the transfer refills
      size          = optional(string, "10Gi")
      storage_class = optional(string)
    }))
    transfer_storage       = optional(string, "20Gi")
    transfer_storage_class = optional(string) # null: the cluster's default StorageClass
    transfer_resources = optional(object({    # over the provider's defaults, key by key
      requests = optional(map(string))
      limits   = optional(map(string))
    }))
    metrics = optional(object({ # null: scrape annotations, no PodMonitor, the default scrapers admitted
      annotations        = optional(bool, true)
      pod_monitor        = optional(bool, false)
      pod_monitor_labels = optional(map(string))
      scrape_from = optional(list(object({
        namespace_labels = optional(map(string))
        pod_labels       = optional(map(string))
      })))
    }))
  })
  default  = {}
  nullable = false
  validation {
    condition     = var.cube.shards >= 1 && var.cube.replicas >= 1 && contains(["base", "base_delta"], var.cube.mode)
    error_message = "cube needs shards >= 1, replicas >= 1, and mode base or base_delta."
  }
}

variable "serving" {
  description = "Paddle Serving (ctr_serving): image, where its dense model is fetched from, how far apply waits, a fixed replica count or autoscaling, Service and resources."
  type = object({
    image          = optional(string)
    launcher_image = optional(string) # default: the cube image of the provider's version
    model_url      = optional(string) # default: ctr_model.tar.gz on the training job's file server
    wait           = optional(string, "none")
    replicas       = optional(number) # default: 1; leave it unset with autoscaling
    autoscaling = optional(object({   # a HorizontalPodAutoscaler sizes the Deployment
      min_replicas              = optional(number, 1)
      max_replicas              = number
      target_cpu_utilization    = optional(number) # percent of the CPU request; default: 80 unless memory is set
      target_memory_utilization = optional(number)
    }))
    service_type        = optional(string, "ClusterIP")
    service_annotations = optional(map(string))
    requests            = optional(map(string))
    limits              = optional(map(string))
  })
  default  = {}
  nullable = false
  validation {
    condition     = contains(["ClusterIP", "NodePort", "LoadBalancer"], var.serving.service_type)
    error_message = "serving.service_type must be ClusterIP, NodePort or LoadBalancer."
  }
}
