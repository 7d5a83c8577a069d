# A CCE cluster is imported by its cluster ID. Its settings and worker pool are read from
# CCE, the Volcano release ctr_cluster installed on it from the cluster.
terraform import ctr_cluster.this cce-abcd1234
