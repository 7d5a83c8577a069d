#!/usr/bin/env bash
# `make test-modules`: `terraform test` of every module under examples/modules that has a
# tests/ folder. The tests plan only (`command = plan`): this provider renders every object
# at plan time and contacts no cluster for a resource that does not exist yet, so they need
# no cluster, and no credentials but the made-up ones in the tests themselves.
#
# It uses the provider of this checkout through the CLI configuration `make dev-config`
# writes (dev_overrides and a filesystem mirror); scripts/validate-examples.sh runs it with
# the one it has already made (TF_CLI_CONFIG_FILE and TF_ACC_TERRAFORM_PATH set).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CTR_DEV_CONFIG:-}" ]; then
  eval "$(scripts/ensure-terraform.sh)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  eval "$(scripts/dev-config.sh "$tmp" "$TF_ACC_TERRAFORM_PATH")"
  export TF_IN_AUTOMATION=1 CTR_DEV_CONFIG=$tmp
fi
tf="$TF_ACC_TERRAFORM_PATH"
for dir in $(find examples/modules -path '*/tests/*.tftest.hcl' -printf '%h\n' | xargs -r -n1 dirname | sort -u); do
  # Modules (a local one) go into a data folder outside the checkout, as in validate-examples.
  export TF_DATA_DIR="$CTR_DEV_CONFIG/test-data/${dir//\//_}"
  echo "test-modules: $dir ($(ls "$dir"/tests/*.tftest.hcl | wc -l) files)"
  if ! (cd "$dir" && "$tf" get -no-color >/dev/null && "$tf" test -no-color); then
    echo "test-modules: $dir failed"; exit 1
  fi
done
