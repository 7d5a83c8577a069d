# The module's plan, with no cluster: ctr renders every Kubernetes object at plan time
# (`manifests`) and contacts no cluster for resources that do not exist yet. The address below
# is closed on purpose: a plan that tried to reach a cluster would fail.
provider "ctr" {
  kubernetes = { host = "https://127.0.0.1:9", token = "not-a-cluster" }
}

run "defaults" {
  command = plan

  assert {
    condition     = ctr_training_job.this.name == "ctr-train" && ctr_cube.this.name == "ctr-cube" && ctr_serving.this.name == "ctr-serving"
    error_message = "every resource is named after var.name"
  }
  assert {
    condition     = length([for k in keys(ctr_cube.this.manifests) : k if startswith(k, "apps/v1/StatefulSet/ctr-cube-shard-")]) == 2
    error_message = "the cube renders one StatefulSet per shard, 2 by default"
  }
  assert {
    condition     = ctr_serving.this.cube_conf == ctr_cube.this.cube_conf
    error_message = "serving reads the cube's cube.conf"
  }
}

run "metrics" {
  command = plan
  variables {
    cube = { metrics = { pod_monitor = true, pod_monitor_labels = { release = "kube-prometheus-stack" } } }
  }

  assert {
    condition     = yamldecode(ctr_cube.this.manifests["monitoring.coreos.com/v1/PodMonitor/ctr-cube"]).metadata.labels.release == "kube-prometheus-stack"
    error_message = "cube.metrics reaches ctr_cube: a PodMonitor with its labels"
  }
}

run "shards_and_namespace" {
  command = plan
  variables {
    name      = "ads"
    namespace = "ads-prod"
    cube      = { shards = 4, replicas = 3 }
  }

  assert {
    condition     = length([for k in keys(ctr_cube.this.manifests) : k if startswith(k, "apps/v1/StatefulSet/ads-cube-shard-")]) == 4
    error_message = "cube.shards = 4 renders 4 shard StatefulSets"
  }
  assert {
    condition     = alltrue([for k in keys(ctr_cube.this.manifests) : yamldecode(ctr_cube.this.manifests[k]).metadata.namespace == "ads-prod"])
    error_message = "every cube object is in var.namespace"
  }
  assert {
    condition     = yamldecode(ctr_cube.this.manifests["apps/v1/StatefulSet/ads-cube-shard-3"]).spec.replicas == 3
    error_message = "cube.replicas = 3 is each shard's StatefulSet's replicas"
  }
  assert {
    condition     = length(jsondecode(output.cube_conf)[0].nodes) == 4
    error_message = "the cube.conf output names 4 shards"
  }
}

run "create_namespace" {
  command = plan
  variables {
    namespace        = "ads"
    create_namespace = true
  }

  assert {
    condition     = ctr_namespace.this[0].name == "ads" && ctr_training_job.this.namespace == "ads" && ctr_cube.this.namespace == "ads" && ctr_serving.this.namespace == "ads"
    error_message = "create_namespace creates var.namespace, and every workload goes there"
  }
}

run "serving_fixed_replicas" {
  command = plan
  variables {
    serving = { replicas = 3 }
  }

  assert {
    condition     = yamldecode(ctr_serving.this.manifests["apps/v1/Deployment/ctr-serving"]).spec.replicas == 3
    error_message = "serving.replicas is the Deployment's"
  }
  assert {
    condition     = !contains(keys(ctr_serving.this.manifests), "autoscaling/v2/HorizontalPodAutoscaler/ctr-serving")
    error_message = "without autoscaling there is no HorizontalPodAutoscaler"
  }
  assert {
    condition     = ctr_serving.this.wait == "none" && ctr_training_job.this.wait == "running"
    error_message = "apply waits for the training job to run, not for serving's first model (the module's defaults)"
  }
}

run "serving_autoscaling" {
  command = plan
  variables {
    serving = { autoscaling = { min_replicas = 2, max_replicas = 6, target_cpu_utilization = 70 }, requests = { cpu = "2" }, wait = "available" }
  }

  assert {
    condition     = ctr_serving.this.replicas == null && !can(yamldecode(ctr_serving.this.manifests["apps/v1/Deployment/ctr-serving"]).spec.replicas)
    error_message = "with autoscaling the Deployment has no replicas: the autoscaler's"
  }
  assert {
    condition = (
      yamldecode(ctr_serving.this.manifests["autoscaling/v2/HorizontalPodAutoscaler/ctr-serving"]).spec.minReplicas == 2 &&
      yamldecode(ctr_serving.this.manifests["autoscaling/v2/HorizontalPodAutoscaler/ctr-serving"]).spec.maxReplicas == 6 &&
      yamldecode(ctr_serving.this.manifests["autoscaling/v2/HorizontalPodAutoscaler/ctr-serving"]).spec.metrics[0].resource.target.averageUtilization == 70
    )
    error_message = "serving.autoscaling renders the HorizontalPodAutoscaler"
  }
  assert {
    condition     = ctr_serving.this.wait == "available"
    error_message = "serving.wait is passed on"
  }
}

run "hdfs_dataset_only_the_ugi_sensitive" {
  command = plan
  variables {
    dataset  = { hdfs_address = "hdfs://10.0.0.5:9000", path = "/train_data", start_hour = "20260401/00", end_hour = "20260401/23" }
    hdfs_ugi = "ads,not-a-password"
  }

  assert {
    condition     = issensitive(ctr_training_job.this.dataset.hdfs_ugi) && !issensitive(ctr_training_job.this.dataset.path) && !issensitive(ctr_training_job.this.dataset.hdfs_address)
    error_message = "only hdfs_ugi is sensitive: the rest of the dataset shows in the plan"
  }
  assert {
    condition = alltrue([for e in [
      { name = "HDFS_ADDRESS", value = "hdfs://10.0.0.5:9000" },
      { name = "DATASET_PATH", value = "/train_data" },
      { name = "START_DATE_HR", value = "20260401/00" },
      { name = "SPARSE_DIM", value = "1000001" },
    ] : contains([for t in yamldecode(ctr_training_job.this.manifests["batch.volcano.sh/v1alpha1/Job/ctr-train"]).spec.tasks[1].template.spec.containers[0].env : { name = t.name, value = try(t.value, null) }], e)])
    error_message = "the trainers read the dataset from their environment"
  }
  assert {
    condition     = strcontains(ctr_training_job.this.manifests["v1/Secret/ctr-train-dataset"], "HDFS_UGI") && !strcontains(join("\n", values(ctr_training_job.this.manifests)), "not-a-password")
    error_message = "the UGI goes into a Secret, and into no manifest in the plan"
  }
}

run "s3_dataset" {
  command = plan
  variables {
    dataset = { path = "/ctr", s3 = { bucket = "ads-samples", endpoint = "https://s3.bj.bcebos.com", region = "bj", credentials_secret = "bos" } }
  }

  assert {
    condition = alltrue([for e in [
      { name = "DATASET_SOURCE", value = "s3" },
      { name = "S3_BUCKET", value = "ads-samples" },
      { name = "AWS_ENDPOINT_URL", value = "https://s3.bj.bcebos.com" },
    ] : contains([for t in yamldecode(ctr_training_job.this.manifests["batch.volcano.sh/v1alpha1/Job/ctr-train"]).spec.tasks[1].template.spec.containers[0].env : { name = t.name, value = try(t.value, null) }], e)])
    error_message = "dataset.s3 reaches the trainers"
  }
}

run "gpus_to_trainers_not_pservers" {
  command = plan
  variables {
    training = { gpus = 2 }
  }

  assert {
    condition     = [for t in yamldecode(ctr_training_job.this.manifests["batch.volcano.sh/v1alpha1/Job/ctr-train"]).spec.tasks : t if t.name == "trainer"][0].template.spec.containers[0].resources.limits["nvidia.com/gpu"] == "2"
    error_message = "training.gpus is each trainer's nvidia.com/gpu limit"
  }
  assert {
    condition     = try([for t in yamldecode(ctr_training_job.this.manifests["batch.volcano.sh/v1alpha1/Job/ctr-train"]).spec.tasks : t if t.name == "pserver"][0].template.spec.containers[0].resources.limits["nvidia.com/gpu"], null) == null
    error_message = "parameter servers get no GPU"
  }
}

run "gpus_to_collective_workers" {
  command = plan
  variables {
    training = { mode = "collective", workers = 3, gpus = 1 }
  }

  assert {
    condition     = ctr_training_job.this.pserver == null && ctr_training_job.this.trainer == null && ctr_training_job.this.worker.replicas == 3
    error_message = "collective mode has workers only"
  }
  assert {
    condition     = yamldecode(ctr_training_job.this.manifests["batch.volcano.sh/v1alpha1/Job/ctr-train"]).spec.tasks[0].template.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"
    error_message = "training.gpus is each worker's nvidia.com/gpu limit"
  }
}

run "pods_pull_secrets_slot_config_file_server" {
  command = plan
  variables {
    image_pull_secrets = ["regcred"]
    pods = {
      cube     = { node_selector = { pool = "cube" } }
      training = { tolerations = [{ key = "gpu", operator = "Exists", effect = "NoSchedule" }], env = { GLOG_v = "1" } }
      serving  = { priority_class_name = "serving-high" }
    }
    training    = { slot_config = "6048\n6049\n" }
    file_server = { image = "registry.example/cube:1.2.3", replicas = 2, limits = { memory = "512Mi" } }
  }

  assert {
    condition = alltrue([
      for t in yamldecode(ctr_training_job.this.manifests["batch.volcano.sh/v1alpha1/Job/ctr-train"]).spec.tasks : t.template.spec.imagePullSecrets == [{ name = "regcred" }]
    ])
    error_message = "the training tasks pull with image_pull_secrets"
  }
  assert {
    # The file server, the model export, the cube's transfer and its 2 shards, and serving.
    condition = length(flatten([for r in [ctr_training_job.this, ctr_cube.this, ctr_serving.this] : [
      for k, m in r.manifests : k if startswith(k, "apps/v1/") && try(yamldecode(m).spec.template.spec.imagePullSecrets == [{ name = "regcred" }], false)
    ]])) == 6
    error_message = "every Deployment and StatefulSet of the stack pulls with image_pull_secrets"
  }
  assert {
    condition     = yamldecode(ctr_cube.this.manifests["apps/v1/StatefulSet/ctr-cube-shard-1"]).spec.template.spec.nodeSelector == { pool = "cube" }
    error_message = "pods.cube reaches the cube servers"
  }
  assert {
    condition     = yamldecode(ctr_training_job.this.manifests["batch.volcano.sh/v1alpha1/Job/ctr-train"]).spec.tasks[0].template.spec.tolerations[0].key == "gpu"
    error_message = "pods.training reaches the training tasks"
  }
  assert {
    condition     = yamldecode(ctr_serving.this.manifests["apps/v1/Deployment/ctr-serving"]).spec.template.spec.priorityClassName == "serving-high"
    error_message = "pods.serving reaches the serving pods"
  }
  assert {
    condition     = yamldecode(ctr_training_job.this.manifests["v1/ConfigMap/ctr-train-slot-conf"]).data["slot.conf"] == "6048\n6049\n"
    error_message = "training.slot_config is the slot.conf ConfigMap"
  }
  assert {
    condition = (
      yamldecode(ctr_training_job.this.manifests["apps/v1/Deployment/ctr-train-fileserver"]).spec.replicas == 2 &&
      yamldecode(ctr_training_job.this.manifests["apps/v1/Deployment/ctr-train-fileserver"]).spec.template.spec.containers[0].image == "registry.example/cube:1.2.3" &&
      yamldecode(ctr_training_job.this.manifests["apps/v1/Deployment/ctr-train-fileserver"]).spec.template.spec.containers[0].resources.limits.memory == "512Mi"
    )
    error_message = "file_server's image, replicas and limits reach the file server"
  }
}
