#!/usr/bin/env bash
# `terraform fmt -check` and `terraform validate` of every example and module, against the
# provider built from this checkout (dev_overrides: no registry is contacted).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
eval "$(scripts/ensure-terraform.sh)"
tf="$TF_ACC_TERRAFORM_PATH"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/bin/terraform-provider-ctr" .
cat > "$tmp/terraformrc" <<RC
provider_installation {
  dev_overrides { "elasticctr/ctr" = "$tmp/bin" }
  direct {}
}
RC
export TF_CLI_CONFIG_FILE="$tmp/terraformrc" TF_IN_AUTOMATION=1 TF_DATA_DIR
"$tf" fmt -check -recursive examples
for dir in $(find examples -name '*.tf' -printf '%h\n' | sort -u); do
  TF_DATA_DIR="$tmp/data/${dir//\//_}"
  # The resource snippets document one resource each; they still must validate on their own.
  # `get` installs local modules only; with dev_overrides no provider needs installing.
  if ! out=$(cd "$dir" && "$tf" get -no-color 2>&1 && "$tf" validate -no-color 2>&1); then
    echo "$out"; echo "validate: $dir failed"; exit 1
  fi
  echo "validate: $dir ok"
done
