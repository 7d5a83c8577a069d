# A queue is imported by its name; only one that a ctr_queue created (it carries the label
# ctr.elasticctr.io/owner = ctr_queue.<name>) can be.
terraform import ctr_queue.ads ads-training
