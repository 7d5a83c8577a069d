# A training job is imported by NAMESPACE/NAME. Its settings are read back from the
# Volcano job's ctr.elasticctr.io/settings annotation, so the next plan is empty.
terraform import ctr_training_job.ctr default/ctr-demo

# Terraform 1.12 and later: an import block by the job's identity (namespace defaults to
# "default").
#   import {
#     to       = ctr_training_job.ctr
#     identity = { namespace = "default", name = "ctr-demo" }
#   }
