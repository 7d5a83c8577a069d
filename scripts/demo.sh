#!/usr/bin/env bash
# The README's first command (`make demo`). Builds the provider and the cube binary, starts a
# local control plane and the CCE emulator, applies examples/demo (CCE cluster -> Volcano ->
# training -> cube -> serving) with the real terraform CLI, shows the plan a reviewer sees for
# a change of shards, runs the cube for real on loopback and looks keys up through the
# cube_conf the apply exported, destroys everything, and stops every process it started.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
state="$root/.testenv/demo"
work="$state/work"
say() { printf '\n==> %s\n' "$*"; }
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  say "stopping the local control plane"
  bin/testenv down -dir "$state"
}

say "building the provider, the cube binary, the CCE emulator and the control-plane launcher"
mkdir -p bin
go build -o bin/terraform-provider-ctr .
go build -o bin/cube ./cube/cmd/cube
go build -o bin/cceemu ./internal/cceemu/cmd/cceemu
go build -o bin/testenv ./internal/testenv/cmd/testenv
eval "$(scripts/ensure-terraform.sh)"
tf="$TF_ACC_TERRAFORM_PATH"

say "building the local control plane (cached after the first run)"
bin/testenv build -repo "$root"

say "starting the local control plane (kube-apiserver, controllers, kwok nodes, Volcano)"
bin/testenv down -dir "$state" 2>/dev/null || true
trap cleanup EXIT
kubeconfig=$(bin/testenv up -dir "$state" -repo "$root")
manifest="file://$state/volcano-manifest.yaml"

say "starting the CCE emulator (its clusters hand out the local control plane's kubeconfig)"
bin/cceemu -listen 127.0.0.1:0 -ak AKDEMO0000000001 -sk demo-secret-key -kubeconfig "$kubeconfig" -phase-delay 300ms -quiet > "$state/cceemu.out" 2> "$state/logs/cceemu.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$state/cceemu.out" ] && break; sleep 0.1; done
read -r endpoint < "$state/cceemu.out"
echo "    CCE emulator at $endpoint"

cat > "$state/terraformrc" <<RC
provider_installation {
  dev_overrides {
    "elasticctr/ctr" = "$root/bin"
  }
  direct {}
}
RC
export TF_CLI_CONFIG_FILE="$state/terraformrc" TF_IN_AUTOMATION=1
rm -rf "$work" && mkdir -p "$work" && cp -r examples/demo examples/modules "$work/"
cd "$work/demo"
vars=(-var "cce_endpoint=$endpoint" -var "volcano_manifest_url=$manifest")

say "terraform get (local modules; the provider is the one just built, through dev_overrides)"
"$tf" get -no-color >/dev/null
echo "    ok"

say "terraform apply: CCE cluster -> Volcano -> training job -> cube -> serving, in one apply"
TF_LOG_PROVIDER=INFO "$tf" apply -no-color -auto-approve -input=false "${vars[@]}" > "$state/apply.log" 2>&1 || { tail -30 "$state/apply.log"; exit 1; }
grep -E '\[INFO\].*(CCE cluster|worker pool|Volcano .* ready|: phase |available|pods at the current revision)|Creation complete|Apply complete' "$state/apply.log" \
  | sed -E 's/^.*\[INFO\] *(provider[^:]*: )?//; s/: (tf_|@)[a-z_]+=.*$//' | sed 's/^/    /' || true
for o in cluster_id serving_url; do echo "    $o = $("$tf" output -raw "$o")"; done

say "what runs in the cluster"
if command -v kubectl >/dev/null; then
  kubectl --kubeconfig "$kubeconfig" get vcjob,statefulsets,deployments,services -n default -l app.kubernetes.io/managed-by=terraform-provider-ctr 2>&1 | sed 's/^/    /'
fi

say "a reviewer's view: cube_shards 2 -> 3"
"$tf" plan -no-color -input=false "${vars[@]}" -var cube_shards=3 > "$state/reshard.plan" 2>&1 || true
grep -E 'will be updated|Warning: Cube|re-shards|demo-cube-shard-2"|"--shards"|cube-conf-sha256|Plan:' "$state/reshard.plan" | sed 's/^/    /' || true
echo "    (the whole plan: $state/reshard.plan)"

say "the cube for real on loopback: a synthetic embedding table in Paddle's layout, file server, transfer, shard servers; lookups through the cube_conf the apply exported"
"$tf" output -raw cube_conf > "$state/cube.conf.exported"
"$root/bin/cube" demo --conf "$state/cube.conf.exported" --replicas 2 --keys 100000 --work-dir "$state/cube-demo" 2>&1 | sed 's/^/    /'

say "terraform destroy (waits until every owned object and pod is gone; the CCE cluster is deleted)"
"$tf" destroy -no-color -auto-approve -input=false "${vars[@]}" 2>&1 | grep -E 'Destroy complete|Destruction complete' | sed 's/^/    /' || true

cd "$root"
cat <<'DONE'

==> done. What ran for real and what was simulated:
    real:      the terraform CLI and this provider; kube-apiserver, etcd, controller-manager, scheduler;
               Volcano's scheduler, controllers and admission webhook (gang scheduling of the training job);
               server-side apply, drift projection, watches; the cube engine: file server, transfer,
               agents and shard servers as processes on 127.0.0.1, lookups over baidu_std through the
               exported cube.conf, a second model version rolled out under load.
    simulated: the nodes (kwok: pods reach Running but run no containers); Baidu Cloud CCE (the local
               emulator, checking bce-auth-v1 signatures; its "clusters" are the local control plane);
               Volcano's own pods from the release manifest (the control plane runs Volcano as processes).
DONE
