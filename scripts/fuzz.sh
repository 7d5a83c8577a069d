#!/usr/bin/env bash
# Runs every fuzz target for a while (default 10s each): `scripts/fuzz.sh 5m` for longer.
# New crashers land in the package's testdata/fuzz and then fail `go test` until fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-10s}"
targets=(
  "./cube/seqfile FuzzReader"
  "./cube/dict FuzzOpen"
  "./cube/proto FuzzReadFrame"
  "./cube/proto FuzzDecodeDict"
  "./internal/cceemu FuzzParseAuthString"
  "./internal/stack FuzzTrainingJobFromSettings"
)
for tg in "${targets[@]}"; do
  set -- $tg
  echo "fuzz: $1 $2 for $t"
  go test "$1" -run '^$' -fuzz "^$2\$" -fuzztime "$t" 2>&1 | tail -1
done
