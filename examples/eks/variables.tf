variable "region" {
  description = "AWS region of the cluster."
  type        = string
  default     = "us-east-1"
}

variable "name" {
  description = "Name of the EKS cluster and prefix of every workload."
  type        = string
  default     = "ctr"
}

variable "kubernetes_version" {
  description = "EKS Kubernetes version."
  type        = string
  default     = "1.34"
}

variable "cluster_role_arn" {
  description = "IAM role of the EKS control plane (AmazonEKSClusterPolicy)."
  type        = string
}

variable "node_role_arn" {
  description = "IAM role of the worker nodes (AmazonEKSWorkerNodePolicy, AmazonEKS_CNI_Policy, AmazonEC2ContainerRegistryReadOnly)."
  type        = string
}

variable "subnet_ids" {
  description = "Subnets of the cluster and its workers, in at least two availability zones."
  type        = list(string)
}

variable "instance_type" {
  description = "EC2 instance type of the workers."
  type        = string
  default     = "m6i.2xlarge"
}

variable "workers" {
  description = "Number of worker nodes."
  type        = number
  default     = 3
}

variable "namespace" {
  description = "Namespace of the stack, created by the apply (it must not exist)."
  type        = string
  default     = "ctr"
}
