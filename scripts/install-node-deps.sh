#!/bin/sh
# Installs what the local cluster's real node runs, from Debian's packages: containerd, runc,
# the CNI plugins, iptables, nftables (to remove the tables iptables-nft leaves behind),
# conntrack and iproute2. kubelet, kube-proxy, CoreDNS and the pause image are built by
# testenv itself (cached like the control plane). Nothing is started here: testenv starts
# containerd as its own process and stops it by PID; where systemd runs the packaged service
# it is stopped and disabled. Called by "make deps" and scripts/test.sh; safe to run again.
set -eu
missing=""
command -v containerd >/dev/null 2>&1 || missing="$missing containerd"
command -v runc >/dev/null 2>&1 || missing="$missing runc"
[ -x /usr/lib/cni/bridge ] || missing="$missing containernetworking-plugins"
command -v iptables >/dev/null 2>&1 || missing="$missing iptables"
command -v nft >/dev/null 2>&1 || missing="$missing nftables"
command -v conntrack >/dev/null 2>&1 || missing="$missing conntrack"
command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
# shellcheck disable=SC2086 # one word per package
"$(dirname "$0")/../cube/scripts/apt-install.sh" containerd $missing
echo "containerd:   $(containerd --version)"
echo "runc:         $(runc --version | head -1)"
echo "CNI plugins:  $(/usr/lib/cni/bridge 2>&1 </dev/null | head -1)"
echo "iptables:     $(iptables --version)"
