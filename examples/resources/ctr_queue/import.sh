# A queue is imported by its name; only one that a ctr_queue created (it carries the label
# ctr.elasticctr.io/owner = ctr_queue.<name>) can be.
terraform import ctr_queue.ads ads-training

# Terraform 1.12 and later: an import block by the queue's identity, its name.
#   import {
#     to       = ctr_queue.ads
#     identity = { name = "ads-training" }
#   }
