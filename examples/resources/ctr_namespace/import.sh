# A namespace is imported by its name; only one that a ctr_namespace created (it carries the
# label ctr.elasticctr.io/owner = ctr_namespace.<name>) can be.
terraform import ctr_namespace.this ads

# Terraform 1.12 and later: an import block by the namespace's identity, its name.
#   import {
#     to       = ctr_namespace.this
#     identity = { name = "ads" }
#   }
