# The cube's workspace follows a training job that another workspace runs: the donefile it
# publishes its models to.
data "ctr_training_job" "ctr" {
  namespace = "ctr-prod"
  name      = "ctr-demo"
}

output "donefile_url" {
  value = data.ctr_training_job.ctr.donefile_url
}
