#!/usr/bin/env bash
# Memory per entry and restart time of the store's accounting:
#
#   scripts/bench/memory.sh [ENTRIES]     (default 1000000; CI uses the tests' 100000)
#
# Runs BenchmarkAccountingMemory (the accounting alone, heap per entry after
# a full GC) and BenchmarkRestart (a real store filled with ENTRIES entries
# of 64 bytes, closed and opened again: seconds until Open returns, and the
# open store's heap per entry, Badger's own tables and caches included).
# Filling 1,000,000 entries takes a few minutes and ~1 GB of disk under
# $TMPDIR. See BENCHMARKS.md, "Memory per entry".
set -euo pipefail
# --help is answered before anything runs, from the comment above (without its "# ").
case "${1:-}" in
  -h|--help) sed -n '2,/^set -/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
  -*|*[!0-9]*) echo "memory.sh: ENTRIES must be a number of entries, got $1 (try --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/../.."
n="${1:-1000000}"
CACHESVC_BENCH_ENTRIES="$n" go test -count=1 -run '^$' -timeout 60m \
  -bench 'BenchmarkAccountingMemory|BenchmarkRestart' -benchtime=1x ./store/
