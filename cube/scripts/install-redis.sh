#!/bin/sh
# Installs Debian's redis-server, which "cube bench --against redis" starts
# on 127.0.0.1. Called by "make deps"; safe to run again.
set -eu
if command -v redis-server >/dev/null 2>&1; then
	echo "redis-server already installed: $(redis-server --version)"
	exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi
echo ">>> apt-get update"
$SUDO apt-get update
echo ">>> apt-get install -y redis-server"
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends redis-server
echo ">>> installed: $(redis-server --version)"
