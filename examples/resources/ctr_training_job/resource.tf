# ElasticCTR's training job: 2 parameter servers and 2 trainers gang-scheduled by Volcano,
# reading Criteo-style samples from HDFS, saving the model to a volume that a file server
# publishes; the model export turns each save into the cube's input for the cube transfer.
resource "ctr_training_job" "ctr" {
  name      = "ctr-demo"
  namespace = "default"

  # The default image (volcanosh/edlctr:v1) and its default entry: EDL's CTR program, which
  # saves models/pass-<p> onto the model volume. An image of your own needs its entry.

  pserver = {
    replicas = 2
    requests = { cpu = "1", memory = "1Gi" }
    limits   = { cpu = "4", memory = "8Gi" }
  }
  trainer = {
    replicas = 2
    requests = { cpu = "1", memory = "1Gi" }
    limits   = { cpu = "4", memory = "8Gi" }
  }

  dataset = {
    hdfs_address = "hdfs://namenode.example:9000"
    hdfs_ugi     = var.hdfs_ugi
    path         = "/train_data"
    start_hour   = "20200401/00"
    end_hour     = "20200401/03"
    sparse_dim   = 1000001
  }

  model_output = {
    size = "10Gi"
  }

  # The model-output step: each save's SparseFeatFactors, as Paddle saved it, becomes a cube
  # version (SequenceFiles and a donefile line), with no Paddle and no dumper of your own.
  model_export = {
    format = "lodtensor"
    path   = "models"
    var    = "SparseFeatFactors"
  }

  # Uploads need the generated upload_token (trainers get it as CUBE_UPLOAD_TOKEN).
  file_server = {
    port         = 8080
    service_type = "ClusterIP"
    upload       = true
  }

  timeouts = {
    create = "20m"
  }
}

variable "hdfs_ugi" {
  description = "HDFS user and password, \"user,password\"."
  type        = string
  sensitive   = true
  default     = "root,changeme"
}

output "donefile_url" {
  description = "What the cube transfer watches."
  value       = ctr_training_job.ctr.donefile_url
}

output "upload_token" {
  description = "Bearer token of uploads to the file server."
  value       = ctr_training_job.ctr.upload_token
  sensitive   = true
}

output "phase" {
  value = ctr_training_job.ctr.phase
}
