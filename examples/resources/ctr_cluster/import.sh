# A CCE cluster is imported by its cluster ID. Its settings and worker pool are read from
# CCE; Volcano is installed by the next apply if the configuration asks for it.
terraform import ctr_cluster.this cce-abcd1234
