# Paddle Serving reading sparse parameters from the cube.
resource "ctr_serving" "serving" {
  name         = "ctr-serving"
  namespace    = "default"
  replicas     = 2
  service_type = "LoadBalancer"
  cube_conf    = ctr_cube.cube.cube_conf
  model_url    = "${ctr_training_job.ctr.file_server_url}/output/ctr_model.tar.gz"
}
