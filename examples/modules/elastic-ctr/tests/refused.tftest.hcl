# Impossible settings are refused at plan time, by the variable that holds them.
provider "ctr" {
  kubernetes = { host = "https://127.0.0.1:9", token = "not-a-cluster" }
}

run "bad_mode" {
  command = plan
  variables {
    training = { mode = "allreduce" }
  }
  expect_failures = [var.training]
}

run "fractional_gpus" {
  command = plan
  variables {
    training = { gpus = 0.5 }
  }
  expect_failures = [var.training]
}

run "no_cube_shards" {
  command = plan
  variables {
    cube = { shards = 0 }
  }
  expect_failures = [var.cube]
}

run "unknown_pods_key" {
  command = plan
  variables {
    pods = { trainer = { node_selector = { pool = "gpu" } } }
  }
  expect_failures = [var.pods]
}

run "hdfs_ugi_without_dataset" {
  command = plan
  variables {
    hdfs_ugi = "ads,not-a-password"
  }
  expect_failures = [var.hdfs_ugi]
}

run "bad_access_mode" {
  command = plan
  variables {
    model_output = { access_mode = "ReadOnlyMany" }
  }
  expect_failures = [var.model_output]
}
