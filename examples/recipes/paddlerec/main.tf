# The paddlerec recipe: PaddleRec 2.x's parameter-server trainer (tools/static_ps_trainer.py)
# in an image of your own with Paddle 2.x and PaddleRec's source at /PaddleRec (PaddleRec
# publishes no image). Volcano's svc plugin names every pod, so the parameter servers' list,
# each pod's POD_IP and trainer id, and the gloo rendezvous that PaddleRec's trainer turns
# on are rendered, with no launcher in the image. The entry points the model's
# runner.model_save_path (output_model_dnn for models/rank/dnn) at the model volume, which
# the parameter servers mount too: each writes its part of the sparse table there, and the
# model export publishes every epoch's save as a cube version.
resource "ctr_training_job" "paddlerec" {
  name      = "paddlerec"
  namespace = "default"
  recipe    = "paddlerec"
  image     = "registry.example.com/team/paddlerec:2.3.0"
  entry     = "cd /PaddleRec && mkdir -p \"$MODEL_OUTPUT_DIR/models\" && ln -sfn \"$MODEL_OUTPUT_DIR/models\" output_model_dnn && python -u tools/static_ps_trainer.py -m models/rank/dnn/config.yaml"

  pserver = {
    replicas = 2
    requests = { cpu = "2", memory = "4Gi" }
  }
  trainer = {
    replicas = 2
    requests = { cpu = "4", memory = "4Gi" }
  }

  # Paddle 2.3+ saves the embedding as MemorySparseTable shards in the folder of its table id
  # (000 for the model's only sparse table), with embedx_dim = sparse_feature_dim - 1.
  model_export = {
    format     = "ps-table"
    var        = "000"
    embedx_dim = 8
    path       = "models"
  }
}

output "donefile_url" {
  description = "What ctr_cube's transfer watches."
  value       = ctr_training_job.paddlerec.donefile_url
}
