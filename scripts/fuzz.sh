#!/usr/bin/env bash
# Runs every fuzz target for a while (default 10s each): `scripts/fuzz.sh 5m` for longer.
# FUZZ_PARALLEL=N runs N fuzz workers (default: one per core); make test uses 1 beside its tests.
# A crasher is saved in the package's testdata/fuzz/<Target> and fails this script (and, once
# committed, `go test`). A failure that leaves no crasher is the fuzz engine's own: when it is
# "context deadline exceeded", Go 1.26's coordinator reporting its own -fuzztime deadline as a
# failure under load (go.dev/issue/75804, fixed in Go 1.27), no input failed and the target
# passes with a note; any other is run once more.
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-10s}"
# The targets are discovered, not listed: every package with a Fuzz function in its tests, and
# each target `go test -list` finds there.
targets=()
for dir in $(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do
  for fn in $(go test -list '^Fuzz' "$dir" | grep '^Fuzz'); do
    targets+=("$dir $fn")
  done
done
if [ "${#targets[@]}" -eq 0 ]; then
  echo "fuzz: no fuzz targets found"; exit 1
fi
echo "fuzz: ${#targets[@]} targets"
crashers() { ls "$1/testdata/fuzz/$2" 2>/dev/null | sort || true; }
for tg in "${targets[@]}"; do
  set -- $tg
  for attempt in 1 2; do
    echo "fuzz: $1 $2 for $t"
    before=$(crashers "$1" "$2")
    if out=$(go test "$1" -run '^$' -fuzz "^$2\$" -fuzztime "$t" ${FUZZ_PARALLEL:+-parallel "$FUZZ_PARALLEL"} 2>&1); then
      echo "$out" | tail -1
      break
    fi
    echo "$out" | tail -25
    if [ "$(crashers "$1" "$2")" != "$before" ]; then
      echo "fuzz: $2 failed; the crasher is in $1/testdata/fuzz/$2"
      exit 1
    fi
    if echo "$out" | grep -qx '    context deadline exceeded'; then
      echo "fuzz: $2: no input failed and none was saved; Go's fuzz coordinator reported its own deadline (go.dev/issue/75804)"
      break
    fi
    if [ "$attempt" = 2 ]; then
      echo "fuzz: $2 failed twice without a crasher"
      exit 1
    fi
    echo "fuzz: $2 failed without a crasher (fuzz engine); running it once more"
  done
done
