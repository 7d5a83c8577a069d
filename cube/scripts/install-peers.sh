#!/bin/sh
# Installs the peers "cube bench" compares against, from Debian's packages:
# redis-server and memcached. The benchmark starts each on 127.0.0.1 itself
# and stops it by PID; the packages' own services are stopped and disabled
# where systemd runs them, so nothing else listens. Called by "make deps";
# safe to run again.
set -eu
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi
missing=""
command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server"
command -v memcached >/dev/null 2>&1 || missing="$missing memcached"
if [ -n "$missing" ]; then
	echo ">>> apt-get update"
	$SUDO apt-get update
	echo ">>> apt-get install -y$missing"
	# shellcheck disable=SC2086 # one word per package
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $missing
	if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
		# shellcheck disable=SC2086
		$SUDO systemctl disable --now $missing >/dev/null 2>&1 || true
	fi
fi
echo "redis-server: $(redis-server --version)"
echo "memcached:    $(memcached -V)"
