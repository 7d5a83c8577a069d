# The stack's own namespace, created before the workloads that reference it and deleted after
# them. A namespace that exists already is refused: set the workloads' namespace to its name.
resource "ctr_namespace" "this" {
  name = "ads"
  labels = {
    "pod-security.kubernetes.io/enforce" = "baseline"
  }
}

resource "ctr_training_job" "ctr" {
  name      = "ctr-demo"
  namespace = ctr_namespace.this.name
}
