#!/usr/bin/env bash
# Runs every fuzz target for a while (default 10s each): `scripts/fuzz.sh 5m` for longer.
# A crasher is saved in the package's testdata/fuzz/<Target> and fails this script (and, once
# committed, `go test`). A failure that leaves no crasher is the fuzz engine's own (its
# coordinator can time out at the deadline on a loaded machine): that target is run once more.
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-10s}"
targets=(
  "./cube/seqfile FuzzReader"
  "./cube/seqfile FuzzReaderCompressed"
  "./cube/dict FuzzOpen"
  "./cube/proto FuzzReadFrame"
  "./cube/proto FuzzDecodeDict"
  "./cube/donefile FuzzParse"
  "./cube/server FuzzDecodeSeekJSON"
  "./internal/cceemu FuzzParseAuthString"
  "./internal/cceemu FuzzRouteBodies"
  "./internal/stack FuzzTrainingJobFromSettings"
)
crashers() { ls "$1/testdata/fuzz/$2" 2>/dev/null | sort || true; }
for tg in "${targets[@]}"; do
  set -- $tg
  for attempt in 1 2; do
    echo "fuzz: $1 $2 for $t"
    before=$(crashers "$1" "$2")
    if out=$(go test "$1" -run '^$' -fuzz "^$2\$" -fuzztime "$t" 2>&1); then
      echo "$out" | tail -1
      break
    fi
    echo "$out" | tail -25
    if [ "$(crashers "$1" "$2")" != "$before" ] || [ "$attempt" = 2 ]; then
      echo "fuzz: $2 failed; a crasher, if any, is in $1/testdata/fuzz/$2"
      exit 1
    fi
    echo "fuzz: $2 failed without a crasher (fuzz engine); running it once more"
  done
done
