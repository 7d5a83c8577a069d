# Paddle Serving is imported by NAMESPACE/NAME.
terraform import ctr_serving.serving default/ctr-serving

# Terraform 1.12 and later: an import block by the serving's identity (namespace defaults to
# "default").
#   import {
#     to       = ctr_serving.serving
#     identity = { namespace = "default", name = "ctr-serving" }
#   }
