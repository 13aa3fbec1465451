#!/usr/bin/env bash
# Rebuilds every built-in plugin and test plugin to wasm, reproducibly.
#
#   scripts/build-plugins.sh          # write next to the sources (commit them)
#   scripts/build-plugins.sh OUTDIR   # write under OUTDIR with the same layout
#                                     # (the freshness test compares the two)
#   PLUGINS="passthrough empty" scripts/build-plugins.sh   # only these
#
# plugins/builtin/<name>/*.go   -> plugins/builtin/<name>/<name>.wasm
# plugins/testdata/src/<name>/  -> plugins/testdata/<name>.wasm
#
# Output depends only on the sources and the Go toolchain, recorded in
# plugins/builtin/TOOLCHAIN; the freshness test skips under another toolchain.
set -euo pipefail
# Answered before anything is built: --help from the comment above, without
# its "# "; any other option is a mistake, not an OUTDIR.
case "${1:-}" in
	-h | --help) sed -n '2,/^set -/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
	-*) echo "build-plugins.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
out="${1:-.}"

build() { # build PKGDIR OUTFILE
	mkdir -p "$(dirname "$2")"
	env -u GOFLAGS CGO_ENABLED=0 GOOS=wasip1 GOARCH=wasm GOWASM= \
		go build -trimpath -buildvcs=false -ldflags='-buildid= -s -w' \
		-buildmode=c-shared -o "$2" "./$1"
}

wanted() { [ -z "${PLUGINS:-}" ] || [[ " $PLUGINS " == *" $1 "* ]]; }

for dir in plugins/builtin/*/; do
	name="$(basename "$dir")"
	wanted "$name" || continue
	ls "$dir"*.go >/dev/null 2>&1 || continue
	grep -q '^package main' "$dir"*.go || continue
	build "$dir" "$out/plugins/builtin/$name/$name.wasm"
done
for dir in plugins/testdata/src/*/; do
	name="$(basename "$dir")"
	wanted "$name" || continue
	build "$dir" "$out/plugins/testdata/$name.wasm"
done
if [ "$out" = "." ]; then
	go env GOVERSION >plugins/builtin/TOOLCHAIN
fi
