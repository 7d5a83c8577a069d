#!/usr/bin/env bash
# `make bench`: benchmark figures (not timed tests), every table in one run. Starts and stops
# its own servers and local control plane; everything listens on 127.0.0.1.
#
#   BENCH_SCALE=0.02 make bench   # shrink the scaling tables' sizes (1M/10M/50M keys x 0.02) for a quick run
#   BENCH_RUNS=5                  # alternating runs per system of the peer comparison (>= 5 for figures you quote)
#   BENCH_DURATION=5s             # measuring time per system and run
#   BENCH_TF_ITERATIONS=5         # terraform plan/apply iterations per provider benchmark
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
state="$root/.testenv/bench"
scale=${BENCH_SCALE:-1}
runs=${BENCH_RUNS:-5}
duration=${BENCH_DURATION:-5s}
tf_iterations=${BENCH_TF_ITERATIONS:-5}
started=$SECONDS
say() { printf '\n==> %s\n' "$*"; }

say "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
mkdir -p bin
go build -o bin/cube ./cube/cmd/cube

say "cube engine vs Redis MGET and memcached multi-get (1M keys x 40 B values, batch 1000, same load generator, servers on CPU 1, load generator on CPU 0)"
bin/cube bench --against redis,memcached --keys 1000000 --value-size 40 --batch 1000 --duration "$duration" --runs "$runs"

say "how costs grow: build and lookups against size, rollout and heal against shards (BENCH_SCALE=$scale)"
bin/cube bench scale --scale "$scale"

say "the model-output step (cube export of a LoDTensor table as Paddle saves it, 10 float32s a row): throughput and peak memory against rows (BENCH_SCALE=$scale)"
bin/cube bench export --rows "$(awk -v s="$scale" 'BEGIN { printf "%d,%d", 1000000*s, 10000000*s }')"

say "rendering (plan-time cost of a training job's objects)"
go test -run '^$' -bench . -benchmem ./internal/stack

eval "$(scripts/ensure-terraform.sh)"
go build -o bin/testenv ./internal/testenv/cmd/testenv
bin/testenv build -repo "$root"
bin/testenv down -dir "$state" 2>/dev/null || true
trap 'bin/testenv down -dir "$state" >/dev/null 2>&1' EXIT
export KUBECONFIG
KUBECONFIG=$(bin/testenv up -dir "$state" -repo "$root" 2>/dev/null)
export TF_ACC=1

say "terraform plan and apply on the local control plane ($("$TF_ACC_TERRAFORM_PATH" version 2>/dev/null | head -1)): a training job, ctr_cube of 4/16/64 shards, the one-apply stack; apply includes waiting for kwok's simulated pods"
go test -run '^$' -bench 'PlanApply' -benchtime "${tf_iterations}x" -timeout 30m ./provider

say "make bench took $((SECONDS - started)) s"
