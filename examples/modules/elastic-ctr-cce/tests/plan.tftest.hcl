# The module's plan, with no cluster and no cloud: ctr renders every Kubernetes object and the
# CCE cluster's settings at plan time, and calls CCE only on apply. Both addresses below are
# closed on purpose: a plan that tried to reach either would fail. The credentials are made up.
provider "ctr" {
  kubernetes = { host = "https://127.0.0.1:9", token = "not-a-cluster" }
}

provider "ctr" {
  alias        = "cluster"
  access_key   = "AKNOTAKEY"
  secret_key   = "not-a-secret"
  cce_endpoint = "http://127.0.0.1:9"
}

variables {
  vpc_id    = "vpc-test"
  subnet_id = "sbn-test"
}

run "defaults" {
  command = plan

  assert {
    condition     = ctr_cluster.this.cce.name == "ctr" && ctr_cluster.this.cce.worker_pool.replicas == 3 && ctr_cluster.this.cce.worker_pool.subnet_id == "sbn-test"
    error_message = "the cluster is named after var.name, with 3 workers in var.subnet_id"
  }
  assert {
    condition     = ctr_cluster.this.cce.kubeconfig_type == "vpc" && ctr_cluster.this.cce.master.exposed_public == false
    error_message = "without public_endpoint the kubeconfig uses the VPC address"
  }
  assert {
    condition     = length(jsondecode(output.cube_conf)[0].nodes) == 2
    error_message = "the stack's cube has elastic-ctr's default of 2 shards"
  }
}

run "public_endpoint_and_settings_passed_on" {
  command = plan
  variables {
    name            = "ads"
    public_endpoint = true
    workers         = { replicas = 5 }
    namespace       = "ads"
    cube            = { shards = 4, replicas = 3 }
  }

  assert {
    condition     = ctr_cluster.this.cce.kubeconfig_type == "public" && ctr_cluster.this.cce.master.exposed_public
    error_message = "public_endpoint exposes the API server and exports a kubeconfig that uses it"
  }
  assert {
    condition     = ctr_cluster.this.cce.worker_pool.replicas == 5
    error_message = "workers.replicas is the worker pool's"
  }
  assert {
    condition     = length(jsondecode(output.cube_conf)[0].nodes) == 4 && jsondecode(output.cube_conf)[0].dup == 3
    error_message = "cube is passed on to elastic-ctr: 4 shards of 3 replicas"
  }
  assert {
    condition     = output.serving_url == "http://ads-serving.ads.svc:8010"
    error_message = "name and namespace are passed on to elastic-ctr"
  }
}

run "cluster_settings" {
  command = plan
  variables {
    workers                 = { replicas = 2, zone = "zoneB", labels = { pool = "ctr" }, taints = [{ key = "dedicated", value = "ctr", effect = "NoSchedule" }] }
    cluster                 = { network_mode = "vpc-eni", service_cidr = "172.16.0.0/16", master = { flavor = "l200" }, delete_cds_snapshot = false }
    volcano_version         = "v1.14.0"
    volcano_keep_on_destroy = true
  }

  assert {
    condition     = ctr_cluster.this.cce.worker_pool.zone == "zoneB" && ctr_cluster.this.cce.worker_pool.labels.pool == "ctr" && ctr_cluster.this.cce.worker_pool.taints[0].effect == "NoSchedule"
    error_message = "workers reaches the worker pool"
  }
  assert {
    condition     = ctr_cluster.this.cce.network_mode == "vpc-eni" && ctr_cluster.this.cce.service_cidr == "172.16.0.0/16" && ctr_cluster.this.cce.delete_cds_snapshot == false
    error_message = "cluster reaches the CCE cluster"
  }
  assert {
    condition     = ctr_cluster.this.cce.master.flavor == "l200" && ctr_cluster.this.cce.master.type == "managedPro"
    error_message = "cluster.master reaches the master, its unset attributes the provider's defaults"
  }
  assert {
    condition     = ctr_cluster.this.volcano.version == "v1.14.0" && ctr_cluster.this.volcano.keep_on_destroy
    error_message = "the Volcano settings reach ctr_cluster"
  }
}

run "bad_workers_refused" {
  command = plan
  variables {
    workers = { replicas = 0 }
  }
  expect_failures = [var.workers]
}

run "bad_volcano_mode_refused" {
  command = plan
  variables {
    volcano_mode = "install"
  }
  expect_failures = [var.volcano_mode]
}

# Settings pass through as they are (type any) and are judged by elastic-ctr's types: every
# one of its variables, in the shapes its own tests use.
run "every_stack_setting_passed_on" {
  command = plan
  variables {
    image_pull_secrets = ["regcred"]
    pods               = { cube = { node_selector = { pool = "cube" } }, training = { tolerations = [{ key = "gpu", operator = "Exists" }] } }
    training           = { mode = "collective", workers = 2, gpus = 1, wait = "submitted" }
    file_server        = { replicas = 2 }
    dataset            = { hdfs_address = "hdfs://10.0.0.5:9000", path = "/train_data", start_hour = "20260401/00", end_hour = "20260401/23" }
    hdfs_ugi           = "ads,not-a-password"
    model_output       = { size = "50Gi", access_mode = "ReadWriteMany" }
    model_export       = null
    cube               = { shards = 3, spread = { topology_key = "topology.kubernetes.io/zone" } }
    serving            = { autoscaling = { max_replicas = 4 }, requests = { cpu = "1" } }
  }

  assert {
    condition     = length(jsondecode(output.cube_conf)[0].nodes) == 3
    error_message = "cube is passed on"
  }
}

