#!/usr/bin/env bash
# Plugin speed, side by side on this machine: the xla canonicalizer as a wasm
# plugin through the real host against the same Go code run natively, the
# instrumented stop flag against wazero's close-on-context-done, and the
# per-call overhead of an empty plugin.
#
#   scripts/bench/plugins.sh [-n COUNT]     # COUNT runs of each (default 3)
#
# Prints medians and the ratios the targets are stated in (plugins/ABI.md,
# BENCHMARKS.md "Plugins"): xla through the plugin >= 100 MB/s on 1 MiB and
# 10 MiB modules, an empty plugin call <= 20 us. Nothing fails on timing;
# the machine's load average is printed with the results.
set -euo pipefail
# --help is answered before anything runs, from the comment above (without its "# ").
case " $* " in *" -h "* | *" --help "*) sed -n '2,/^set -/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."

count=3
while [ $# -gt 0 ]; do
  case "$1" in
    -n)
      [ $# -ge 2 ] || { echo "plugins.sh: -n needs a value (try --help)" >&2; exit 2; }
      count="$2"; shift 2 ;;
    *) echo "plugins.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done

out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() { # PACKAGE REGEX BENCHTIME
  echo "go test -bench '$2' $1" >&2
  go test -run '^$' -bench "$2" -benchtime "$3" -count "$count" "$1" | grep '^Benchmark' >>"$out"
}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
run ./plugins/builtin/xla/xlacanon/ '^BenchmarkCanonicalize(1|10)MiB$' 10x
run ./plugins/builtin/xla/ '^BenchmarkPluginCanonicalize' 5x
run ./keying/ '^BenchmarkKeyXLA' 3x
run ./plugins/ '^Benchmark(EmptyPluginCall|PassthroughCall)' 1s
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$out" "$load_before" "$load_after" <<'EOF'
import re, statistics, sys
ns, mbs = {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    name = re.sub(r'-\d+$', '', f[0])
    ns.setdefault(name, []).append(float(f[2]))
    m = re.search(r'([\d.]+) MB/s', line)
    if m:
        mbs.setdefault(name, []).append(float(m.group(1)))
med = lambda d, k: statistics.median(d[k]) if k in d else float('nan')
print(f"\nload average before {sys.argv[2]}, after {sys.argv[3]}; medians of {len(next(iter(ns.values())))} runs\n")
print("| xla canonicalization | native Go | wasm plugin | plugin / native | target |")
print("|---|---|---|---|---|")
for size in ("1MiB", "10MiB"):
    n, p = med(mbs, f"BenchmarkCanonicalize{size}"), med(mbs, f"BenchmarkPluginCanonicalize{size}")
    print(f"| {size} module | {n:.0f} MB/s | {p:.0f} MB/s | {p/n:.2f}x | >= 100 MB/s: {'met' if p >= 100 else 'not met'} |")
e = med(mbs, "BenchmarkPluginCanonicalize10MiBEscapedHTML")
print(f"| 10MiB, HTML-escaped JSON (Go json.Marshal) | | {e:.0f} MB/s | | |")
print("\n| key path (keying.Keyer.Key) | stop flag | wazero checks | flag / wazero |")
print("|---|---|---|---|")
for size in ("1MiB", "10MiB"):
    a, b = med(mbs, f"BenchmarkKeyXLA{size}"), med(mbs, f"BenchmarkKeyXLA{size}WazeroChecks")
    print(f"| xla {size} | {a:.0f} MB/s | {b:.0f} MB/s | {a/b:.1f}x |")
print(f"| xla 10MiB, memo hit (no plugin call) | {med(mbs, 'BenchmarkKeyXLA10MiBMemo'):.0f} MB/s | | |")
a, b = med(ns, "BenchmarkEmptyPluginCall") / 1e3, med(ns, "BenchmarkEmptyPluginCallWazeroChecks") / 1e3
print("\n| per call | stop flag | wazero checks | target |")
print("|---|---|---|---|")
print(f"| empty plugin | {a:.1f} us | {b:.1f} us | <= 20 us: {'met' if a <= 20 else 'not met'} |")
print(f"| passthrough plugin (encoding/json inside) | {med(ns, 'BenchmarkPassthroughCall')/1e3:.1f} us | | |")
EOF
