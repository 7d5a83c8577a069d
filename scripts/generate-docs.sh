#!/usr/bin/env bash
# `make generate`: rebuild docs/ from the provider's schemas, templates/ and examples/.
# The schema comes from the Terraform CLI on this machine (no registry, no download), and
# tfplugindocs runs at a pinned version from the module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
TFPLUGINDOCS=github.com/hashicorp/terraform-plugin-docs/cmd/tfplugindocs@v0.24.0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
eval "$(scripts/ensure-terraform.sh)"

echo "generate: building the provider"
go build -o "$tmp/bin/terraform-provider-ctr" .
cat > "$tmp/terraformrc" <<RC
provider_installation {
  dev_overrides { "elasticctr/ctr" = "$tmp/bin" }
  direct {}
}
RC
mkdir -p "$tmp/work"
printf 'terraform {\n  required_providers {\n    ctr = { source = "elasticctr/ctr" }\n  }\n}\n' > "$tmp/work/main.tf"
echo "generate: reading the schema with $(basename "$TF_ACC_TERRAFORM_PATH")"
(cd "$tmp/work" && TF_CLI_CONFIG_FILE="$tmp/terraformrc" "$TF_ACC_TERRAFORM_PATH" providers schema -json > "$tmp/schema.json")
# tfplugindocs looks the provider up by its short name.
sed -i -E 's#"[a-z0-9.-]+/elasticctr/ctr":#"ctr":#' "$tmp/schema.json"
echo "generate: rendering docs/ with tfplugindocs"
go run "$TFPLUGINDOCS" generate --provider-name ctr --providers-schema "$tmp/schema.json" \
  --provider-dir "$root" --rendered-provider-name "ctr" 2>&1 | grep -vE '^(go: downloading|rendering|copying|exporting|getting|generating missing)' || true
test -f docs/resources/training_job.md
