#!/usr/bin/env bash
# scripts/promtool.sh: build Prometheus' promtool once into the cache
# directory outside the repository and print its path. With it there,
# cmd/cachesvc TestMonitoring runs `promtool check rules` and `promtool test
# rules` on scripts/monitoring/alerts.yml (skipped without it, failed with
# CACHESVC_REQUIRE_PROMTOOL=1).
#
# `go install` refuses the module for its replace directives, so the module
# is downloaded into the module cache and built inside it. It is not part of
# scripts/test.sh's setup: cold (downloading Kubernetes, AWS and Azure SDKs
# for service discovery) it took 676 s on two shared cores. Rebuilt only when
# the pinned version changes.
#
# Environment:
#   PROMETHEUS_VERSION   module version (default: the pinned one, Prometheus 3.x)
set -euo pipefail
# It takes no arguments: --help prints the comment above (without its "# "),
# anything else is refused before a download starts.
case "${1:-}" in
"") ;;
-h | --help) sed -n '2,/^set -/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
*) echo "promtool.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
esac

PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/cachesvc/bin"
bin="$dir/promtool"
stamp="$dir/promtool.version"

if [[ -x "$bin" && "$(cat "$stamp" 2>/dev/null || true)" == "$PROMETHEUS_VERSION" ]]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$dir"
start=$SECONDS
# Outside this module, so that nothing touches the repository's go.mod.
moddir="$(cd "$dir" && GOFLAGS= go mod download -json "github.com/prometheus/prometheus@${PROMETHEUS_VERSION}" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [[ -z "$moddir" || ! -d "$moddir" ]]; then
	echo "promtool.sh: go mod download gave no module directory" >&2
	exit 1
fi
# The module's go.work names directories its zip lacks: build without it.
# The module cache is read-only; build into a temporary name and rename, so
# that a cut-short build never leaves a half-written binary.
(cd "$moddir" && GOWORK=off GOFLAGS=-mod=mod go build -o "$bin.tmp" ./cmd/promtool)
mv "$bin.tmp" "$bin"
echo "$PROMETHEUS_VERSION" >"$stamp"
echo "promtool.sh: built promtool in $((SECONDS - start))s" >&2
echo "$bin"
