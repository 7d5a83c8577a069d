# A cube is imported by NAMESPACE/NAME; its settings come back from the transfer Deployment's
# annotation and the control token from its Secret.
terraform import ctr_cube.cube default/ctr-cube
