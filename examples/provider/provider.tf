terraform {
  required_providers {
    ctr = {
      source = "elasticctr/ctr"
    }
  }
}

# The default connection for every resource that sets no `kubernetes` of its own.
# Baidu Cloud credentials (for ctr_cluster) come from BCE_ACCESS_KEY_ID and
# BCE_SECRET_ACCESS_KEY when not set here.
provider "ctr" {
  region = "bj"

  kubernetes = {
    config_path = "~/.kube/config"
  }
}
