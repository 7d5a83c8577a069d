terraform {
  required_version = ">= 1.11"
  required_providers {
    ctr = {
      source                = "elasticctr/ctr"
      version               = ">= 0.1.0"
      configuration_aliases = [ctr.cluster]
    }
  }
}
