# The serving team's workspace finds the cube that the ML team's workspace runs: its
# cube.conf for Paddle Serving and its transfer, by namespace and name.
data "ctr_cube" "ads" {
  namespace = "ctr-prod"
  name      = "ctr-cube"
}

output "cube_conf" {
  value = data.ctr_cube.ads.cube_conf
}

output "cube_transfer_url" {
  value = data.ctr_cube.ads.transfer_url
}
