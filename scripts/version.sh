#!/usr/bin/env bash
# The version of this checkout, as internal/version derives it for a plain `go build` here:
# a release tag (v1.2.3 -> 1.2.3) when HEAD carries one and the tree is clean; otherwise the
# commit's first 12 hex digits, with -dirty when `git status` shows changes; "dev" outside git.
# The GNUmakefile stamps it into the provider (-X main.version) and tags `make images` with it,
# so the provider's default image is the image built from the same checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! rev=$(git rev-parse HEAD 2>/dev/null); then
	echo dev
	exit 0
fi
if [[ -n "$(git status --porcelain 2>/dev/null)" ]]; then
	echo "${rev:0:12}-dirty"
	exit 0
fi
for tag in $(git tag --points-at HEAD 2>/dev/null | sort -rV); do
	if [[ $tag =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
		echo "${tag#v}"
		exit 0
	fi
done
echo "${rev:0:12}"
