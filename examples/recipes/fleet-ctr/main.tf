# The fleet-ctr recipe: ElasticCTR's own image (hub.baidubce.com/ctr/fleet-ctr) trains hour by
# hour from HDFS and, after each hour, its first trainer dumps the embedding as SequenceFiles
# with a donefile line. The recipe's entry gives its scripts the role-maker variables its
# template leaves out and points its ctr_cube folder at the model volume, which the file
# server publishes at /output, where the dumper's donefile says the data is. Its slot.conf is
# served at the file server's root, where the script fetches it.
resource "ctr_training_job" "fleet_ctr" {
  name      = "fleet-ctr"
  namespace = "default"
  recipe    = "fleet-ctr"

  pserver = {
    replicas = 2
    requests = { cpu = "1", memory = "1Gi" }
    limits   = { cpu = "10", memory = "30Gi" }
  }
  trainer = {
    replicas = 2
    requests = { cpu = "1", memory = "1Gi" }
    limits   = { cpu = "10", memory = "30Gi" }
  }

  # train_with_mlflow.py reads HDFS only, and every one of these.
  dataset = {
    hdfs_address = "hdfs://namenode.example:9000"
    hdfs_ugi     = "root,"
    path         = "/train_data"
    start_hour   = "20191225/00"
    end_hour     = "20191225/03"
    sparse_dim   = 1000001
  }

  # The slots the model reads, one per line (ElasticCTR's slot.conf).
  slot_config = join("\n", [for s in range(6003, 6029) : tostring(s)])

  # No model_export: the image writes the cube's input itself. The defaults of model_output
  # (mounted at /output, donefile ctr_cube/donefile/base.txt) are what its dumper writes.
}

output "donefile_url" {
  description = "What ctr_cube's transfer watches (model_output's default path)."
  value       = ctr_training_job.fleet_ctr.donefile_url
}
