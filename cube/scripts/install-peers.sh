#!/bin/sh
# Installs the peers "cube bench" compares against, from Debian's packages:
# redis-server and memcached. The benchmark starts each on 127.0.0.1 itself
# and stops it by PID; the packages' own services are stopped and disabled
# where systemd runs them, so nothing else listens. Called by "make deps";
# safe to run again.
set -eu
missing=""
command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server"
command -v memcached >/dev/null 2>&1 || missing="$missing memcached"
# shellcheck disable=SC2086 # one word per package
"$(dirname "$0")/apt-install.sh" "$missing" $missing
echo "redis-server: $(redis-server --version)"
echo "memcached:    $(memcached -V)"
