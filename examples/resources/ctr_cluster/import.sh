# A CCE cluster is imported by its cluster ID. Its settings and worker pool are read from
# CCE, the Volcano release ctr_cluster installed on it from the cluster.
terraform import ctr_cluster.this cce-abcd1234

# An existing cluster (kubernetes = { config_path = ... }) is imported by its kubeconfig,
# optionally with a context after #.
terraform import ctr_cluster.this 'kubeconfig:/home/me/.kube/config#prod'

# Terraform 1.12 and later: an import block by the cluster's identity, its CCE cluster ID
# (an existing cluster's identity, its API server, says where it is, not how to reach it:
# import it by its kubeconfig as above).
#   import {
#     to       = ctr_cluster.this
#     identity = { cluster_id = "cce-abcd1234" }
#   }
