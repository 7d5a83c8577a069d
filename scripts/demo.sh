#!/usr/bin/env bash
# The README's first command (`make demo`): build the provider, start a local control plane
# (real kube-apiserver, kwok nodes, Volcano), apply the example training job with the real
# terraform CLI, show what it made and what a reviewer sees for a change, then destroy
# everything and stop every process it started.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
state="$root/.testenv/demo"
work="$state/work"
say() { printf '\n==> %s\n' "$*"; }

say "building the provider"
mkdir -p bin
go build -o bin/terraform-provider-ctr .
go build -o bin/testenv ./internal/testenv/cmd/testenv
eval "$(scripts/ensure-terraform.sh)"
tf="$TF_ACC_TERRAFORM_PATH"

say "building the local control plane (cached after the first run)"
bin/testenv build -repo "$root"

say "starting the local control plane"
bin/testenv down -dir "$state" 2>/dev/null || true
trap 'say "stopping the local control plane"; bin/testenv down -dir "$state"' EXIT
kubeconfig=$(bin/testenv up -dir "$state" -repo "$root")

# Use the provider just built, with no registry: dev_overrides.
cat > "$state/terraformrc" <<RC
provider_installation {
  dev_overrides {
    "elasticctr/ctr" = "$root/bin"
  }
  direct {}
}
RC
export TF_CLI_CONFIG_FILE="$state/terraformrc" TF_IN_AUTOMATION=1
rm -rf "$work" && mkdir -p "$work"
cp examples/resources/ctr_training_job/resource.tf "$work/main.tf"
cat > "$work/provider.tf" <<TF
terraform {
  required_providers {
    ctr = { source = "elasticctr/ctr" }
  }
}
provider "ctr" {
  kubernetes = { config_path = "$kubeconfig" }
}
TF
cd "$work"

say "terraform plan: the Kubernetes objects the job will own"
"$tf" plan -no-color -out=plan.out | grep -E '^\s+\+ "[^"]+/' | sed 's/ = <<-EOT//' || true

say "terraform apply (waits until Volcano runs the gang)"
TF_LOG_PROVIDER=INFO "$tf" apply -no-color -auto-approve plan.out 2>&1 \
  | grep -E 'Apply complete|created|configured|waiting|Running|phase|ctr_training_job.ctr: (Creation|Still)' \
  | sed -E 's/^.*\[INFO\] *(provider[^:]*: )?//; s/: (tf_|@)[a-z_]+=.*$//' || true
"$tf" output -no-color

say "what runs in the cluster"
if command -v kubectl >/dev/null; then
  kubectl --kubeconfig "$kubeconfig" get vcjob,pods,deploy,svc,pvc -l ctr.elasticctr.io/owner=ctr_training_job.ctr-demo -o wide 2>&1 || true
else
  "$tf" state show -no-color ctr_training_job.ctr | grep -E '^\s+(phase|id|file_server_url|donefile_url|min_available)\s'
fi

say "a reviewer's view of a change: 3 trainers instead of 2"
python3 - <<'PY' 2>/dev/null || perl -0pi -e 's/(trainer = \{\n\s+replicas = )2/${1}3/' main.tf
import re
s = open("main.tf").read()
s = re.sub(r'(trainer = \{\n\s+replicas = )2', r'\g<1>3', s)
open("main.tf", "w").write(s)
PY
"$tf" plan -no-color 2>&1 | grep -E 'must be replaced|forces replacement|Warning|Changing|PADDLE_TRAINERS_NUM|Plan:' | sed 's/^/    /' || true

say "terraform destroy (waits until every owned object and pod is gone)"
"$tf" destroy -no-color -auto-approve 2>&1 | grep -E 'Destroy complete|Destroying|destroyed' || true

cd "$root"
say "done: the terraform CLI, kube-apiserver, controllers and Volcano ran for real; nodes are simulated by kwok (pods do not run containers)"
