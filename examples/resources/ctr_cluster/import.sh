# A CCE cluster is imported by its cluster ID. Its settings and worker pool are read from
# CCE, the Volcano release ctr_cluster installed on it from the cluster.
terraform import ctr_cluster.this cce-abcd1234

# An existing cluster (kubernetes = { config_path = ... }) is imported by its kubeconfig,
# optionally with a context after #.
terraform import ctr_cluster.this 'kubeconfig:/home/me/.kube/config#prod'
