# Paddle Serving reading sparse parameters from a cube (cube_conf usually comes from
# ctr_cube.<name>.cube_conf).
variable "cube_conf" {
  type    = string
  default = <<-EOT
    [{"dict_name": "test_dict", "shard": 2, "dup": 2, "timeout": 200, "retry": 3, "backup_request": 0,
      "type": "ipport_list", "load_balancer": "rr",
      "nodes": [{"ipport_list": "http://ctr-cube-shard-0.default.svc:8027"},
                {"ipport_list": "http://ctr-cube-shard-1.default.svc:8027"}]}]
  EOT
}

resource "ctr_serving" "serving" {
  name         = "ctr-serving"
  namespace    = "default"
  replicas     = 2
  service_type = "LoadBalancer"
  cube_conf    = var.cube_conf
  model_url    = "http://ctr-demo-fileserver.default.svc:8080/output/ctr_model.tar.gz"
}
