# A Volcano queue for the ads team's training: a share of the cluster twice the default
# queue's, capped, and created before the jobs that reference it.
resource "ctr_queue" "ads" {
  name   = "ads-training"
  weight = 2
  capability = {
    cpu              = "64"
    memory           = "256Gi"
    "nvidia.com/gpu" = "8"
  }
}

resource "ctr_training_job" "ctr" {
  name      = "ctr-demo"
  namespace = "ads"
  queue     = ctr_queue.ads.name
}
