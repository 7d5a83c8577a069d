#!/usr/bin/env bash
# Prints the environment that points Terraform tests at a Terraform CLI, building one when
# the machine has none: `eval "$(scripts/ensure-terraform.sh)"`.
#
# Prefers `terraform` on PATH. Otherwise builds OpenTofu from the Go module proxy once
# (about 3 minutes) into the cache; plugin-testing then needs TF_ACC_PROVIDER_HOST.
set -euo pipefail
TOFU_VERSION=v1.12.6
cache="${CTR_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ctr-testenv}"

if tf=$(command -v terraform); then
  echo "export TF_ACC_TERRAFORM_PATH=$tf"
  exit 0
fi
tofu="$cache/tofu-$TOFU_VERSION/tofu"
if [ ! -x "$tofu" ]; then
  echo "ensure-terraform: no terraform on PATH; building OpenTofu $TOFU_VERSION from the module proxy (once, ~3 min)..." >&2
  dir=$(go mod download -json "github.com/opentofu/opentofu@$TOFU_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  mkdir -p "$(dirname "$tofu")"
  (cd "$dir" && go build -ldflags "-X github.com/opentofu/opentofu/version.dev=no" -o "$tofu.tmp" ./cmd/tofu) >&2
  mv "$tofu.tmp" "$tofu"
  echo "ensure-terraform: built $tofu" >&2
fi
echo "export TF_ACC_TERRAFORM_PATH=$tofu"
echo "export TF_ACC_PROVIDER_HOST=registry.opentofu.org"
