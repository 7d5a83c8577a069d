#!/usr/bin/env bash
# `make dev-config`: use the provider built from this checkout with the Terraform CLI, without
# touching ~/.terraformrc. It builds the provider into DIR (default dist/dev), writes
# DIR/terraformrc and prints the line that selects it:
#   export TF_CLI_CONFIG_FILE=DIR/terraformrc
# With it, `source = "elasticctr/ctr"` is this build (dev_overrides), and `terraform init`
# works as usual: it finds ctr in a filesystem mirror of the same build, and installs every
# other provider (hashicorp/aws for examples/eks, ...) from its registry.
#   scripts/dev-config.sh [DIR] [TERRAFORM]     TERRAFORM: the CLI (default: terraform on PATH)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mkdir -p "${1:-dist/dev}" && cd "${1:-dist/dev}" && pwd)
tf=${2:-terraform}
version=$(scripts/version.sh)
echo "dev-config: building the provider ($version) into $dir/bin" >&2
go build -ldflags "-s -w -X main.version=$version" -o "$dir/bin/terraform-provider-ctr" .
# The mirror must sit below the registry host the CLI spells elasticctr/ctr with.
mkdir -p "$dir/probe" && printf 'terraform {\n  required_providers {\n    ctr = { source = "elasticctr/ctr" }\n  }\n}\n' > "$dir/probe/main.tf"
host=$(cd "$dir/probe" && TF_CLI_CONFIG_FILE=/dev/null "$tf" providers -no-color 2>/dev/null | sed -n 's|.*provider\[\(.*\)/elasticctr/ctr\].*|\1|p')
rm -rf "$dir/probe"
[ -n "$host" ] || { echo "dev-config: cannot tell the registry host of $tf" >&2; exit 1; }
rm -rf "$dir/mirror"
mirror="$dir/mirror/$host/elasticctr/ctr/0.0.1/$(go env GOOS)_$(go env GOARCH)"
mkdir -p "$mirror" && cp "$dir/bin/terraform-provider-ctr" "$mirror/terraform-provider-ctr_v0.0.1"
cat > "$dir/terraformrc" <<RC
provider_installation {
  dev_overrides { "elasticctr/ctr" = "$dir/bin" }
  filesystem_mirror {
    path    = "$dir/mirror"
    include = ["$host/elasticctr/ctr"]
  }
  direct { exclude = ["$host/elasticctr/ctr"] }
}
RC
echo "export TF_CLI_CONFIG_FILE=$dir/terraformrc"
