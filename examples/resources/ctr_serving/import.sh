# Paddle Serving is imported by NAMESPACE/NAME.
terraform import ctr_serving.serving default/ctr-serving
