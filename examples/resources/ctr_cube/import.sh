# A cube is imported by NAMESPACE/NAME; its settings come back from the transfer Deployment's
# annotation and the control token from its Secret.
terraform import ctr_cube.cube default/ctr-cube

# Terraform 1.12 and later: an import block by the cube's identity (namespace defaults to
# "default").
#   import {
#     to       = ctr_cube.cube
#     identity = { namespace = "default", name = "ctr-cube" }
#   }
