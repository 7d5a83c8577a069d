terraform {
  required_providers {
    ctr = {
      source = "elasticctr/ctr"
    }
  }
}
