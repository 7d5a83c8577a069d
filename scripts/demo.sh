#!/usr/bin/env bash
# The README's first command (`make demo`). Builds the provider and the cube binary, starts a
# local control plane and the CCE emulator, applies examples/demo (CCE cluster -> Volcano ->
# training -> cube -> serving) with the real terraform CLI, shows the plan a reviewer sees for
# a change of shards, runs the cube for real in pods on the local cluster's real node (a stand-in
# trainer feeds it) and looks keys up through the cube_conf the apply exported, rolls a second
# version out under load, destroys everything, and stops every process it started.
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
  "$root/bin/testenv" down -dir "$state"
}

say "building the provider, the cube binary, the CCE emulator and the control-plane launcher"
mkdir -p bin
# Stamped as `make build` stamps it: its default cube image is the one `make images` tags below.
go build -ldflags "-X main.version=$(scripts/version.sh)" -o bin/terraform-provider-ctr .
go build -o bin/cube ./cube/cmd/cube
go build -o bin/cceemu ./internal/cceemu/cmd/cceemu
go build -o bin/testenv ./internal/testenv/cmd/testenv
eval "$(scripts/ensure-terraform.sh)"
tf="$TF_ACC_TERRAFORM_PATH"

say "building the local control plane (cached after the first run)"
bin/testenv build -repo "$root"

say "building the cube image and installing what the real node runs (containerd, runc, CNI plugins)"
make --no-print-directory images >/dev/null
scripts/install-node-deps.sh | sed 's/^/    /'

say "starting the local control plane (kube-apiserver, controllers, kwok nodes, Volcano) and a real node that runs the cube image"
bin/testenv down -dir "$state" 2>/dev/null || true
trap cleanup EXIT
kubeconfig=$(bin/testenv up -dir "$state" -repo "$root" -node -image "$root/dist/image/cube-image.tar")
bin/testenv node-vars -dir "$state" > "$state/real-node.tfvars.json"
eval "$(bin/testenv env -dir "$state" | grep '^CLUSTER_DNS=')"
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
vars=(-var "cce_endpoint=$endpoint" -var "volcano_manifest_url=$manifest" -var-file "$state/real-node.tfvars.json")

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

say "the cube for real, in pods on the real node: stand-in trainer -> file server -> transfer -> 2 replicas per shard; lookups from this machine through the exported cube.conf (names resolved by the cluster's DNS)"
"$tf" output -raw real_cube_conf > "$state/real-cube.conf"
seek=("$root/bin/cube" seek --conf "$state/real-cube.conf" --dns "$CLUSTER_DNS" --first 100000)
served() {
  for _ in $(seq 180); do
    if out=$("${seek[@]}" --check "$1" 2>&1); then echo "    $(echo "$out" | tail -1)"; return 0; fi
    sleep 1
  done
  echo "$out" | tail -5; echo "generation $1 was not served within 3 minutes"; return 1
}
served 1
echo "    (these are lookups through the exported cube.conf)"

say "a second model version (model_generation = 2: the training job runs again) rolled out while lookups run"
# The lookups end once generation 2 has answered alone for 5 s (--until-gen), at most after 5 minutes.
"${seek[@]}" --for 5m --until-gen 2 --workers 4 --batch 100 > "$state/load.out" 2>&1 &
load=$!
pids+=("$load")
"$tf" apply -no-color -auto-approve -input=false "${vars[@]}" -var model_generation=2 > "$state/apply2.log" 2>&1 || { tail -30 "$state/apply2.log"; exit 1; }
grep -E 'Apply complete' "$state/apply2.log" | sed 's/^/    /'
served 2
wait "$load" || { cat "$state/load.out"; echo "lookups during the rollout failed"; exit 1; }
echo "    load during the rollout: $(grep -E 'lookups of' "$state/load.out")"
echo "    $(grep -E 'took over' "$state/load.out")"

say "a prediction: Paddle Serving's half on this machine (cube demo): a version with embeddings and its dense model, cube serving following the cube with the stand-in of Paddle's server, one click probability"
"$root/bin/cube" demo --keys 20000 --replicas 1 > "$state/serving-demo.log" 2>&1 || { tail -20 "$state/serving-demo.log"; exit 1; }
grep -E '^==> (training writes version 3|prediction)' "$state/serving-demo.log" | sed 's/^==> /    /'

say "terraform destroy (waits until every owned object and pod is gone; the CCE cluster is deleted)"
"$tf" destroy -no-color -auto-approve -input=false "${vars[@]}" 2>&1 | grep -E 'Destroy complete|Destruction complete' | sed 's/^/    /' || true

cd "$root"
cat <<'DONE'

==> done. What ran for real and what was simulated:
    real:      the terraform CLI and this provider; kube-apiserver, etcd, controller-manager, scheduler;
               Volcano's scheduler, controllers and admission webhook (gang scheduling of the training job);
               server-side apply, drift projection, watches; a real node (kubelet, containerd, runc, CNI
               bridge, CoreDNS, kube-proxy) running this repository's image in pods: the stand-in
               trainer, the file server, the cube's transfer and shard servers; lookups over baidu_std
               through the exported cube.conf; a second model version rolled out under load; one
               prediction through cube serving and the stand-in of Paddle's server, on this machine.
    simulated: the kwok nodes, where Paddle's training and Serving pods reach Running but run no
               containers (their images cannot run here); Baidu Cloud CCE (the local
               emulator, checking bce-auth-v1 signatures; its "clusters" are the local control plane);
               Volcano's own pods from the release manifest (the control plane runs Volcano as processes).
DONE
