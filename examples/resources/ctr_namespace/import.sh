# A namespace is imported by its name; only one that a ctr_namespace created (it carries the
# label ctr.elasticctr.io/owner = ctr_namespace.<name>) can be.
terraform import ctr_namespace.this ads
