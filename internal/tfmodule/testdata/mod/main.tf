locals {
  shards = var.cube.shards > 0 ? var.cube.shards : null
}

resource "ctr_cube" "this" {
  count  = 1
  name   = "${var.name}-cube"
  shards = local.shards
  zone   = coalesce(var.zone, "a")
  pod    = lookup(var.pods, "cube", null)
  spread = var.cube.spread == null ? null : { topology_key = var.cube.spread.key, required = true }
  token  = var.token
}

module "inner" {
  source = "./inner"
  cube   = var.cube
}
