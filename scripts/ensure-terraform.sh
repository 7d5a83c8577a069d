#!/usr/bin/env bash
# Prints the environment that points Terraform tests at a Terraform CLI, building one when
# the machine has none: `eval "$(scripts/ensure-terraform.sh)"`.
#
# Prefers `terraform` on PATH. Otherwise builds OpenTofu from the Go module proxy once
# (about 3 minutes) into the cache; plugin-testing then needs TF_ACC_PROVIDER_HOST.
#
# With --identity, a Terraform with resource identity (1.12 or later), which the tests of
# import by identity need (provider/identity_test.go; they skip on an older one):
#   eval "$(scripts/ensure-terraform.sh --identity)"; go test -run '^TestAccIdentity_' ./provider
# The `terraform` on PATH when it is that new, else HashiCorp Terraform $TERRAFORM_VERSION built
# once from the Go module proxy into the cache: 3 min 38 s and 5 CPU-minutes on two idle cores
# with empty Go caches (151 MB of modules downloaded, 760 MB of build cache), a 51 MB binary.
set -euo pipefail
TOFU_VERSION=v1.12.6
TERRAFORM_VERSION=v1.13.3
cache="${CTR_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ctr-testenv}"

if [ "${1:-}" = --identity ]; then
  tf=$(command -v terraform || true) v=""
  [ -z "$tf" ] || v=$(CHECKPOINT_DISABLE=1 "$tf" version 2>/dev/null | sed -n '1s/^Terraform v\([0-9]*\.[0-9]*\).*/\1/p' || true)
  if [ -z "$v" ] || [ "$(printf '1.12\n%s\n' "$v" | sort -V | head -1)" != 1.12 ]; then
    tf="$cache/terraform-$TERRAFORM_VERSION/terraform"
  fi
  if [ ! -x "$tf" ]; then
    echo "ensure-terraform: no terraform 1.12+ on PATH; building Terraform $TERRAFORM_VERSION from the module proxy for the resource identity tests (once, ~4 min)..." >&2
    dir=$(go mod download -json "github.com/hashicorp/terraform@$TERRAFORM_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    [ -d "$dir" ] || { echo "ensure-terraform: no source of Terraform $TERRAFORM_VERSION" >&2; exit 1; }
    src=$(mktemp -d)
    trap 'rm -rf "$src"' EXIT
    cp -R "$dir/." "$src"
    chmod -R u+w "$src"
    # Terraform's go.mod replaces the remote-state backends it keeps in modules of their own
    # (azurerm, s3, gcs, ...) by their folders, which a module's zip leaves out and which the
    # proxy does not serve at a release's commit: the copy goes without them (a test's state is
    # local), each dropped from the list of backends when its folder is missing.
    init="$src/internal/backend/init/init.go"
    while read -r mod; do
      [ ! -d "$src/$mod" ] || continue
      alias=$(sed -n "s|^\s*\([A-Za-z0-9_]*\) \"github.com/hashicorp/terraform/$mod\"$|\1|p" "$init")
      [ -z "$alias" ] || sed -i "/\b$alias\b/d" "$init"
    done < <(sed -n 's|^replace .* => \./\(.*\)$|\1|p' "$src/go.mod")
    mkdir -p "$(dirname "$tf")"
    (cd "$src" && GOWORK=off go build -ldflags "-s -w -X github.com/hashicorp/terraform/version.dev=no" -o "$tf.$$.tmp" .) >&2
    mv "$tf.$$.tmp" "$tf"
    echo "ensure-terraform: built $tf" >&2
  fi
  echo "export TF_ACC_TERRAFORM_PATH=$tf"
  # HashiCorp's: the provider's address is plugin-testing's default, registry.terraform.io.
  echo "unset TF_ACC_PROVIDER_HOST"
  exit 0
fi

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
