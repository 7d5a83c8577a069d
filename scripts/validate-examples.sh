#!/usr/bin/env bash
# `terraform fmt -check` and `terraform validate` of every example and module, then the modules'
# `terraform test` (scripts/test-modules.sh), against the provider built from this checkout
# (dev_overrides: no registry is contacted for it). The
# examples that need another provider (hashicorp/aws, hashicorp/google) are validated where
# `terraform init` can install it, and only fmt-checked where it cannot (offline).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
eval "$(scripts/ensure-terraform.sh)"
tf="$TF_ACC_TERRAFORM_PATH"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The provider of this checkout through the same CLI configuration users make with
# `make dev-config`: dev_overrides, and a filesystem mirror for `init`, which looks every
# provider up, overridden or not.
eval "$(scripts/dev-config.sh "$tmp" "$tf")"
export TF_IN_AUTOMATION=1 TF_DATA_DIR
"$tf" fmt -check -recursive examples
# Providers other than ctr that an example needs (hashicorp/aws for examples/eks, ...).
others() { grep -ho 'source *= *"[a-z0-9-]*/[a-z0-9-]*"' "$1"/*.tf | sed 's/.*"\(.*\)"/\1/' | grep -vx 'elasticctr/ctr' | sort -u || true; }
for dir in $(find examples -name '*.tf' -printf '%h\n' | sort -u); do
  TF_DATA_DIR="$tmp/data/${dir//\//_}"
  if grep -q configuration_aliases "$dir"/*.tf; then
    # A module that takes a second provider configuration cannot be validated alone; the
    # examples that call it (examples/demo, examples/cce) validate it with theirs.
    callers=$(grep -rl --include='*.tf' "source *= *\"\.\./${dir#examples/}\"" examples | xargs -r -n1 dirname | sort -u | tr '\n' ' ')
    [ -n "$callers" ] || { echo "validate: $dir takes provider aliases but no example calls it"; exit 1; }
    echo "validate: $dir through its callers: $callers"
    continue
  fi
  # The resource snippets document one resource each; they still must validate on their own.
  # `get` installs local modules only; with dev_overrides ctr needs no installing, but another
  # provider (aws, google) must be installed with init, which needs its registry.
  need=$(others "$dir")
  if [ -n "$need" ] && ! (cd "$dir" && "$tf" init -backend=false -input=false -no-color >"$tmp/init.log" 2>&1); then
    echo "validate: $dir skipped: it needs $(echo $need), which this machine cannot install (terraform fmt checked it)"
    continue
  fi
  if ! out=$(cd "$dir" && "$tf" get -no-color 2>&1 && "$tf" validate -no-color 2>&1); then
    echo "$out"; echo "validate: $dir failed"; exit 1
  fi
  echo "validate: $dir ok"
done
# The modules' own tests (terraform test, plan mode, no cluster), with the same provider build.
CTR_DEV_CONFIG="$tmp" scripts/test-modules.sh
