output "serving_url" {
  description = "In-cluster URL of Paddle Serving."
  value       = ctr_serving.this.url
}

output "cube_conf" {
  description = "The cube.conf (JSON) Paddle Serving reads; one http://<shard service>:<port> per shard."
  value       = ctr_cube.this.cube_conf
}

output "cube_endpoints" {
  description = "Address of each cube shard's Service, shard by shard."
  value       = ctr_cube.this.endpoints
}

output "file_server_url" {
  description = "In-cluster URL of the file server that publishes the model output."
  value       = ctr_training_job.this.file_server_url
}

output "donefile_url" {
  description = "URL of the donefile (base.txt) the cube transfer watches."
  value       = ctr_training_job.this.donefile_url
}

output "training_phase" {
  description = "Phase of the Volcano training job when last read."
  value       = ctr_training_job.this.phase
}
