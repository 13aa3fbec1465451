#!/usr/bin/env bash
# scripts/seaweedfs.sh: build SeaweedFS's `weed` once into the cache
# directory outside the repository and print its path. Used by the opt-in
# second-engine test (CACHESVC_SEAWEEDFS=1 go test ./store/tiered -run SeaweedFS).
#
# `go install` refuses the module for its replace directives, so the module
# is downloaded into the module cache and built inside it (about 4.5 minutes
# on two cores). Rebuilt only when the pinned version changes.
#
# Environment:
#   SEAWEEDFS_VERSION   module version (default: the pinned pseudo-version)
set -euo pipefail

case "${1:-}" in
"") ;;
-h | --help)
	sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*)
	echo "seaweedfs.sh: unknown argument $1 (try --help)" >&2
	exit 2
	;;
esac

SEAWEEDFS_VERSION="${SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/cachesvc/bin"
bin="$dir/weed"
stamp="$dir/weed.version"

if [[ -x "$bin" && "$(cat "$stamp" 2>/dev/null || true)" == "$SEAWEEDFS_VERSION" ]]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$dir"
start=$SECONDS
# Outside this module, so that nothing touches the repository's go.mod.
# On failure go prints its reason inside the JSON (the "Error" field).
if ! json="$(cd "$dir" && GOFLAGS= go mod download -json "github.com/seaweedfs/seaweedfs@${SEAWEEDFS_VERSION}" 2>&1)"; then
	echo "seaweedfs.sh: cannot download github.com/seaweedfs/seaweedfs@${SEAWEEDFS_VERSION} (check the network, GOPROXY and SEAWEEDFS_VERSION):" >&2
	echo "$json" >&2
	exit 1
fi
moddir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json")"
if [[ -z "$moddir" || ! -d "$moddir" ]]; then
	echo "seaweedfs.sh: go mod download gave no module directory" >&2
	exit 1
fi
# The module cache is read-only; build from it into a temporary name and
# rename, so that a cut-short build never leaves a half-written binary.
(cd "$moddir" && GOFLAGS=-mod=mod go build -o "$bin.tmp" ./weed)
mv "$bin.tmp" "$bin"
echo "$SEAWEEDFS_VERSION" >"$stamp"
echo "seaweedfs.sh: built weed in $((SECONDS - start))s" >&2
echo "$bin"
