#!/usr/bin/env bash
# The project's test command (`make test`, and what CI runs): lint, unit tests, and the
# acceptance tests against a real local control plane that this script starts and stops.
#   scripts/test.sh            everything
#   scripts/test.sh ./provider only these packages (acceptance tests included)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
state="$root/.testenv/test"
pkgs=("${@:-./...}")

# Each step says when it starts (minutes:seconds since the start), so that a log shows where
# the time goes.
say() { printf '==> [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

say "checking formatting"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi

# The resource identity tests (provider/identity_test.go) need Terraform 1.12 or later, which
# the CLI the other tests use may not be: they run on their own, after the provider's other
# tests, with the one `scripts/ensure-terraform.sh --identity` finds or builds once (5
# CPU-minutes: 3 min 38 s on two idle cores with empty Go caches). The build starts now, in a
# process group and a scheduling group (autogroup) of its own at the lowest priority: it takes
# what the builds and tests before the identity tests leave of the cores (the acceptance tests
# leave most of them idle), and the step that waits for it shows in the log how long it did.
mkdir -p "$state"
identity_pid=""
stop_identity_build() { [ -z "$identity_pid" ] || kill -- "-$identity_pid" 2>/dev/null || true; }
provider_pkg=$(go list ./provider)
if go list "${pkgs[@]}" | grep -x "$provider_pkg" >/dev/null; then
  say "finding a Terraform 1.12+ for the resource identity tests, building one if need be, in the background (log: $state/identity-terraform.log)"
  setsid bash -c '{ echo 19 > /proc/self/autogroup; } 2>/dev/null; exec nice -n 19 scripts/ensure-terraform.sh --identity' \
    > "$state/identity-terraform.env" 2> "$state/identity-terraform.log" &
  identity_pid=$!
  trap stop_identity_build EXIT
fi

say "installing test dependencies (redis-server and memcached for the cube benchmark test; containerd, runc, CNI plugins, iptables for the real node)"
cube/scripts/install-peers.sh
scripts/install-node-deps.sh

say "building the local control plane (cached after the first run)"
mkdir -p bin
go build -o bin/testenv ./internal/testenv/cmd/testenv
bin/testenv build -repo "$root"

say "building the cube image the real node runs (make images)"
make --no-print-directory images >/dev/null
image="$root/dist/image/cube-image.tar"

# The real node's own test waits on pods most of its time: it runs beside the checks below,
# which want the cores. In a process group of its own, stopped with the script; a run killed
# half-way leaves the host to the next start, which restores it (testenv's node record).
say "the real node alone, in the background: pods of our image, cluster DNS, a ClusterIP dropped without kube-proxy, the host restored (log: $state/node-test.log)"
CTR_TESTENV_NODE_TEST=1 CTR_TESTENV_CUBE_IMAGE="$image" setsid go test -count=1 -timeout 10m -run '^(TestRecoverHostAfterACrash|TestRealNode|TestHostSnapshotSeesChanges)$' -v ./internal/testenv > "$state/node-test.log" 2>&1 &
node_pid=$!
trap 'kill -- "-$node_pid" 2>/dev/null || true; stop_identity_build' EXIT

say "lint (golangci-lint: errcheck, staticcheck, govet, unused, importas, depguard)"
go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.14.0 run ./...

say "finding a Terraform CLI"
eval "$(scripts/ensure-terraform.sh)"
echo "    $TF_ACC_TERRAFORM_PATH"

say "checking every example and module: terraform fmt -check and validate, then the modules' terraform test (plan mode, no cluster)"
scripts/validate-examples.sh

say "checking docs/ is generated from the current schemas"
scripts/generate-docs.sh >/dev/null
if [ -n "$(git status --porcelain -- docs)" ]; then
  git status --porcelain -- docs; git diff --stat -- docs
  echo "docs/ is stale: run make generate and commit the result"; exit 1
fi

say "checking each module's README lists its inputs and outputs as variables.tf and outputs.tf declare them"
go run ./internal/tfmodule/cmd/moduledocs -check examples/modules/*

say "checking the generated Go of every .proto is current"
go run ./internal/genproto -check cube/paddle/servingpb

say "waiting for the real node's test"
if ! wait "$node_pid"; then
  tail -80 "$state/node-test.log"; echo "the real node test failed (log: $state/node-test.log)"; exit 1
fi
trap stop_identity_build EXIT
grep -E '^\s*(--- |ok )|real node Ready|create to Ready|counters' "$state/node-test.log" || true

say "starting the local control plane with the real node"
bin/testenv down -dir "$state" 2>/dev/null || true
trap 'stop_identity_build; say "stopping the local control plane"; bin/testenv down -dir "$state"' EXIT
export KUBECONFIG
KUBECONFIG=$(bin/testenv up -dir "$state" -repo "$root" -node -image "$image")

# An empty CLI configuration: the machine's may point at a missing file, which OpenTofu
# prints on stdout and plugin-testing then fails to parse.
: > "$state/terraformrc"
export TF_CLI_CONFIG_FILE="$state/terraformrc" TF_ACC=1 TF_IN_AUTOMATION=1

# The identity tests with their Terraform (above), verbose, so that a skip shows: one fails the
# run as a failure does.
skip_identity=()
[ -z "$identity_pid" ] || skip_identity=(-skip '^TestAccIdentity_')
identity_tests() {
  say "waiting for the Terraform of the resource identity tests"
  if ! wait "$identity_pid"; then
    tail -40 "$state/identity-terraform.log"; echo "no Terraform for the identity tests (log: $state/identity-terraform.log)"; exit 1
  fi
  identity_pid=""
  local status=0
  ( # shellcheck source=/dev/null
    . "$state/identity-terraform.env"
    say "running the resource identity tests (import blocks by identity) with $(CHECKPOINT_DISABLE=1 "$TF_ACC_TERRAFORM_PATH" version 2>/dev/null | sed -n 1p), $TF_ACC_TERRAFORM_PATH (log: $state/identity-test.log)"
    go test -count=1 -timeout 15m -run '^TestAccIdentity_' -v ./provider > "$state/identity-test.log" 2>&1 ) || status=$?
  grep -E '^\s*--- |^(ok|FAIL)\s' "$state/identity-test.log" || true
  if [ "$status" != 0 ] || grep -q -- '--- SKIP: TestAccIdentity' "$state/identity-test.log"; then
    echo "the resource identity tests failed or skipped (log: $state/identity-test.log)"; exit 1
  fi
}

# The provider's acceptance tests that stay in a namespace of their own call t.Parallel and
# run four at a time, after the ones that change the cluster (Volcano, the real node's
# capacity, the environment) have run alone: they spend their time waiting on controllers,
# and leave the cores mostly idle (a warm run used 14 CPU-minutes in 27 minutes). So with
# ./... they run in the background from the start, beside the other packages' tests and then
# beside fuzzing (one worker), which come one after the other: both want the cores, and the
# timing tests of the cube's chaos (TestFaults) do not share them with a fuzzer.
if [ "${pkgs[*]}" = "./..." ]; then
  say "running tests: the provider's acceptance tests in the background (go test ./provider, log: $state/provider-test.log)"
  # Each in a process group of its own, so that a failure stops the other and its children.
  # -v: the log keeps every test's duration, and a success prints the slowest (below).
  setsid go test -count=1 -timeout 45m -parallel 4 -v "${skip_identity[@]}" ./provider > "$state/provider-test.log" 2>&1 &
  provider_pid=$!
  fuzz_pid=""
  trap 'kill -- "-$provider_pid" 2>/dev/null || true; [ -z "$fuzz_pid" ] || kill -- "-$fuzz_pid" 2>/dev/null || true
        stop_identity_build; say "stopping the local control plane"; bin/testenv down -dir "$state"' EXIT
  say "running tests: every other package (go test ./...)"
  go test -count=1 -timeout 45m $(go list ./... | grep -vx "$provider_pkg")

  say "fuzzing every decoder of outside input briefly (${FUZZTIME:=10s} each, one worker) beside the provider's tests (log: $state/fuzz.log)"
  FUZZ_PARALLEL=1 setsid scripts/fuzz.sh "$FUZZTIME" > "$state/fuzz.log" 2>&1 &
  fuzz_pid=$!

  say "waiting for the fuzzing"
  if ! wait "$fuzz_pid"; then
    tail -40 "$state/fuzz.log"; echo "fuzzing failed (log: $state/fuzz.log)"; exit 1
  fi
  grep -E '^(fuzz: [0-9]+ targets|ok )' "$state/fuzz.log"

  # Benchmarks are not run by go test; once each here, so that make bench cannot break unseen
  # (the one-apply stack's did when its example stopped defaulting to a kubeconfig). Beside
  # the provider's acceptance tests, in namespaces of their own, once the fuzzer is done.
  say "the provider benchmarks, one iteration each, beside the provider's tests (figures: make bench)"
  if ! go test -count=1 -run '^$' -bench 'PlanApply' -benchtime 1x -timeout 15m ./provider > "$state/bench.log" 2>&1; then
    tail -60 "$state/bench.log"; echo "a provider benchmark failed (log: $state/bench.log)"; exit 1
  fi
  grep -E '^Benchmark' "$state/bench.log"

  say "waiting for the provider's acceptance tests"
  status=0
  wait "$provider_pid" || status=$?
  if [ "$status" != 0 ]; then
    cat "$state/provider-test.log"
    echo "the provider's tests failed (log: $state/provider-test.log)"; exit 1
  fi
  echo "    the slowest of the provider's tests (and the real-node group's parts), minutes:seconds:"
  grep -E '^(--- PASS|    --- PASS: TestAccRealNode/)' "$state/provider-test.log" |
    sed -E 's/^ *--- PASS: ([^ ]+) \(([0-9.]+)s\)$/\2 \1/' | sort -rn |
    awk 'NR <= 15 { printf "    %d:%02d %s\n", $1 / 60, $1 % 60, $2 }' || true
  grep -E '^ok ' "$state/provider-test.log" || true
  # After the others: the CCE one takes over the cluster's Volcano, which no other test may
  # see (in one run it would be among the tests that run alone, before the parallel ones).
  identity_tests
  say "stopping the local control plane"
  trap - EXIT
  bin/testenv down -dir "$state"
else
  say "running tests: go test ${pkgs[*]}"
  go test -count=1 -timeout 45m -parallel 4 "${skip_identity[@]}" "${pkgs[@]}"
  [ -z "$identity_pid" ] || identity_tests
fi

if [ "${pkgs[*]}" = "./..." ]; then
  say "end to end: the README's demo (make demo), as a newcomer runs it"
  scripts/demo.sh > "$state/demo.log" 2>&1 || { tail -60 "$state/demo.log"; echo "the demo failed (log: $state/demo.log)"; exit 1; }
  grep -E 'Apply complete|Destroy complete|lookups through the exported cube.conf|0 failed, 0 mixing|click probability' "$state/demo.log"
fi
