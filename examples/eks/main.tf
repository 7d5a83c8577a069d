# The ElasticCTR stack on a new EKS cluster, in one apply. The ctr provider connects the way
# the kubernetes provider's users know: host and CA from the cluster resource, a short-lived
# token from `aws eks get-token` (an exec plugin, run whenever a token is needed). Provider
# configuration is never stored in state and is evaluated afresh on every run, so the tokens
# (valid 15 minutes) are current at refresh and destroy too, and nothing secret is stored.
# Terraform needs the aws CLI on PATH and credentials allowed to administer the cluster.
#
# Storage: EKS clusters created at Kubernetes 1.30 or later have no default StorageClass, and
# nothing provisions EBS volumes until the EBS CSI driver is installed. This example installs
# the driver as an EKS add-on (its controller's IAM role given through EKS Pod Identity) and a
# gp3 StorageClass, and names that class on every claim of the stack, so that nothing depends
# on a cluster default (docs/guides/storage.md).
terraform {
  required_version = ">= 1.11"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.29" # aws_eks_pod_identity_association
    }
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = ">= 2.20"
    }
    ctr = {
      source = "elasticctr/ctr"
    }
  }
}

provider "aws" {
  region = var.region
}

resource "aws_eks_cluster" "this" {
  name     = var.name
  role_arn = var.cluster_role_arn
  version  = var.kubernetes_version

  vpc_config {
    subnet_ids = var.subnet_ids
  }

  # Whoever creates the cluster administers it: the same identity `aws eks get-token` uses.
  access_config {
    authentication_mode                         = "API"
    bootstrap_cluster_creator_admin_permissions = true
  }
}

resource "aws_eks_node_group" "workers" {
  cluster_name    = aws_eks_cluster.this.name
  node_group_name = "${var.name}-workers"
  node_role_arn   = var.node_role_arn
  subnet_ids      = var.subnet_ids
  instance_types  = [var.instance_type]

  scaling_config {
    desired_size = var.workers
    min_size     = var.workers
    max_size     = var.workers
  }
}

locals {
  # Nothing secret: the exec plugin fetches the token when the client needs one.
  kubernetes = {
    host                   = aws_eks_cluster.this.endpoint
    cluster_ca_certificate = base64decode(aws_eks_cluster.this.certificate_authority[0].data)
    exec = {
      api_version = "client.authentication.k8s.io/v1beta1"
      command     = "aws"
      args        = ["eks", "get-token", "--cluster-name", aws_eks_cluster.this.name, "--region", var.region]
    }
  }
}

# Known only once the cluster exists: the plan renders the workloads without contacting it.
provider "ctr" {
  kubernetes = local.kubernetes
}

# The same connection, for the one object ctr does not make: the StorageClass.
provider "kubernetes" {
  host                   = local.kubernetes.host
  cluster_ca_certificate = local.kubernetes.cluster_ca_certificate
  exec {
    api_version = local.kubernetes.exec.api_version
    command     = local.kubernetes.exec.command
    args        = local.kubernetes.exec.args
  }
}

# The EBS CSI driver's controller creates, attaches and deletes volumes: it needs an IAM role
# with the AWS managed policy for it, which EKS Pod Identity hands to its service account
# (ebs-csi-controller-sa in kube-system). The association exists before the add-on starts the
# controller, so that its pods get the role's credentials from their start.
resource "aws_eks_addon" "pod_identity" {
  cluster_name = aws_eks_cluster.this.name
  addon_name   = "eks-pod-identity-agent"
  depends_on   = [aws_eks_node_group.workers]
}

resource "aws_iam_role" "ebs_csi" {
  name = "${var.name}-ebs-csi"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "pods.eks.amazonaws.com" }
      Action    = ["sts:AssumeRole", "sts:TagSession"]
    }]
  })
}

resource "aws_iam_role_policy_attachment" "ebs_csi" {
  role       = aws_iam_role.ebs_csi.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
}

resource "aws_eks_pod_identity_association" "ebs_csi" {
  cluster_name    = aws_eks_cluster.this.name
  namespace       = "kube-system"
  service_account = "ebs-csi-controller-sa"
  role_arn        = aws_iam_role.ebs_csi.arn
}

# The add-on's controller and node pods need nodes to run on before the add-on is healthy.
resource "aws_eks_addon" "ebs_csi" {
  cluster_name = aws_eks_cluster.this.name
  addon_name   = "aws-ebs-csi-driver"
  depends_on = [
    aws_eks_node_group.workers,
    aws_eks_addon.pod_identity,
    aws_eks_pod_identity_association.ebs_csi,
    aws_iam_role_policy_attachment.ebs_csi,
  ]
}

# Encrypted gp3 volumes, each made in the zone of the node its first pod is placed on
# (WaitForFirstConsumer: an EBS volume attaches only in its own zone). Marked default for
# other workloads too; the stack names it on each claim.
resource "kubernetes_storage_class_v1" "gp3" {
  metadata {
    name = "gp3"
    annotations = {
      "storageclass.kubernetes.io/is-default-class" = "true"
    }
  }
  storage_provisioner    = "ebs.csi.aws.com"
  volume_binding_mode    = "WaitForFirstConsumer"
  reclaim_policy         = "Delete"
  allow_volume_expansion = true
  parameters = {
    type      = "gp3"
    encrypted = "true"
  }
  depends_on = [aws_eks_addon.ebs_csi]
}

# Volcano on the new cluster. ctr_cluster's own connection is stored in its state: host, CA and
# the exec command, which yields a current token at refresh and destroy.
resource "ctr_cluster" "volcano" {
  kubernetes = local.kubernetes
  depends_on = [aws_eks_node_group.workers]
}

module "stack" {
  source           = "../modules/elastic-ctr"
  name             = var.name
  namespace        = var.namespace
  create_namespace = true # the stack's own namespace on the new cluster
  training         = { pservers = 2, trainers = 2 }
  model_output     = { storage_class = kubernetes_storage_class_v1.gp3.metadata[0].name }
  cube = {
    shards                 = 2
    replicas               = 2
    transfer_storage_class = kubernetes_storage_class_v1.gp3.metadata[0].name
  }
  serving = { service_type = "LoadBalancer" }

  # The claims name the class and wait for the driver; destroy removes the stack (its
  # namespace, with every claim in it) before them.
  depends_on = [ctr_cluster.volcano, aws_eks_addon.ebs_csi, kubernetes_storage_class_v1.gp3]
}

output "serving_url" {
  value = module.stack.serving_url
}
