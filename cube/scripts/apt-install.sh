#!/bin/sh
# Installs Debian packages, with progress: apt-install.sh "SERVICES" PACKAGE...
# Nothing to install (no PACKAGE) does nothing. Where systemd runs them, the SERVICES the
# packages start are stopped and disabled: what the project runs, it starts itself and stops
# by PID. Used by install-peers.sh and the repository's scripts/install-node-deps.sh.
set -eu
services=$1
shift
[ $# -gt 0 ] || exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi
echo ">>> apt-get update"
$SUDO apt-get update
echo ">>> apt-get install -y $*"
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "$@"
if [ -n "$services" ] && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	# shellcheck disable=SC2086 # one word per service
	$SUDO systemctl disable --now $services >/dev/null 2>&1 || true
fi
