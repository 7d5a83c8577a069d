#!/usr/bin/env bash
# `make bench`: benchmark figures (not timed tests). Starts and stops its own local control
# plane for the provider benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
state="$root/.testenv/bench"
say() { printf '\n==> %s\n' "$*"; }

say "cube engine vs Redis MGET (1M keys x 40 B values, batch 1000, same client, same machine)"
go run ./cube/cmd/cube bench --against redis --keys 1000000 --value-size 40 --batch 1000 --duration 10s

say "rendering (plan-time cost of a training job's objects)"
go test -run '^$' -bench . -benchmem ./internal/stack

eval "$(scripts/ensure-terraform.sh)"
mkdir -p bin
go build -o bin/testenv ./internal/testenv/cmd/testenv
bin/testenv build -repo "$root"
bin/testenv down -dir "$state" 2>/dev/null || true
trap 'bin/testenv down -dir "$state" >/dev/null 2>&1' EXIT
export KUBECONFIG
KUBECONFIG=$(bin/testenv up -dir "$state" -repo "$root" 2>/dev/null)
export TF_ACC=1

say "terraform plan and apply of one training job on the local control plane ($("$TF_ACC_TERRAFORM_PATH" version 2>/dev/null | head -1))"
go test -run '^$' -bench 'PlanApply' -benchtime 3x ./provider
