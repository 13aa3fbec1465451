#!/usr/bin/env bash
# Benchmarks cachesvc against its peers on loopback, in one run on one machine,
# and writes BENCHMARKS.md: nginx (static files with sendfile, WebDAV PUT) and,
# given a binary, bazel-remote (its HTTP CAS, /cas/<sha256>).
#
#   scripts/bench/run.sh [-d SECONDS] [-r ROUNDS] [-o OUT.md] [--quick]
#                        [--peers-only] [--bazel-remote PATH]
#
# -d: seconds per timed run (5); -r: interleaved rounds of the peers table,
# each figure the median (3); --quick: -d 2 -r 2 and fewer entries (a -d or
# -r after it overrides those);
# --peers-only: only the peers table (headline figures), not the scenario
# table; --bazel-remote PATH (or BAZEL_REMOTE_BIN): bazel-remote's binary,
# built from its source (it is not in the Go module proxy); without one that
# baseline is skipped. The peers table is also printed, ready to paste.
set -euo pipefail
# --help is answered before anything runs, from the comment above (without its "# ").
case " $* " in *" -h "* | *" --help "*) sed -n '2,/^set -/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/../.."
root=$(pwd)

dur=5
rounds=3
out="$root/BENCHMARKS.md"
quick=0
peers_only=0
brbin=${BAZEL_REMOTE_BIN:-}
while [ $# -gt 0 ]; do
  case "$1" in
    -d|-r|-o|--bazel-remote)
      [ $# -ge 2 ] || { echo "run.sh: $1 needs a value (try --help)" >&2; exit 2; } ;;
  esac
  case "$1" in
    -d) dur="$2"; shift 2 ;;
    -r) rounds="$2"; shift 2 ;;
    -o) out="$2"; shift 2 ;;
    --quick) quick=1; dur=2; rounds=2; shift ;;
    --peers-only) peers_only=1; shift ;;
    --bazel-remote) brbin="$2"; shift 2 ;;
    *) echo "run.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done
if [ -n "$brbin" ] && ! [ -x "$brbin" ]; then
  echo "run.sh: bazel-remote binary $brbin is not an executable file (pass --bazel-remote PATH or set BAZEL_REMOTE_BIN)" >&2
  exit 2
fi
started=$(date +%s)

if ! command -v nginx >/dev/null 2>&1; then
  echo "installing nginx (Debian package) for the baseline..." >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
  service nginx stop >/dev/null 2>&1 || true
fi

work=$(mktemp -d /tmp/cachesvc-bench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "building cachesvc and the load generator..." >&2
go build -o "$work/cachesvc" ./cmd/cachesvc
go build -o "$work/loadgen" ./scripts/bench/loadgen
go build -o "$work/gensig" ./scripts/bench/gensig

loadavg_before=$(cut -d' ' -f1-3 /proc/loadavg)

# Request logs off on every side: nginx runs with access_log off, bazel-remote
# with --access_log_level none, so cachesvc logs warnings and errors only (at
# info it writes one JSON line, one write system call, per request).
# --pprof-addr lets a run be profiled
# (go tool pprof http://127.0.0.1:$ppport/debug/pprof/profile).
# A second cachesvc runs with --sync-writes, for the crash-safe PUT figures.
declare -A url pid
# data_dir TARGET: the directory a server keeps its entries in (drop_page_cache
# reads the same).
data_dir() {
  case "$1" in
    nginx) echo "$work/www" ;;
    bazel-remote) echo "$work/bazel-remote-data" ;;
    *) echo "$work/$1-data" ;;
  esac
}
start_cachesvc() { # start_cachesvc TARGET [FLAGS...]
  local target=$1 port; shift
  port=$(free_port)
  url[$target]="http://127.0.0.1:$port"
  "$work/cachesvc" serve --addr "127.0.0.1:$port" --data "$(data_dir "$target")" --log-format json --log-level warn \
    "$@" >"$work/$target.log" 2>&1 &
  pid[$target]=$!
  pids+=($!)
}
ppport=$(free_port)
start_cachesvc cachesvc --pprof-addr "127.0.0.1:$ppport"
start_cachesvc cachesvc-sync --sync-writes

ngport=$(free_port)
url[nginx]="http://127.0.0.1:$ngport"
mkdir -p "$(data_dir nginx)/blobs" "$work/nginx-tmp"
cat >"$work/nginx.conf" <<CONF
user root;
worker_processes $(nproc);
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 4096; }
http {
  sendfile on;
  tcp_nopush on;
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path $work/nginx-tmp;
  server {
    listen 127.0.0.1:$ngport;
    root $(data_dir nginx);
    location /blobs/ {
      dav_methods PUT;
      create_full_put_path on;
      client_max_body_size 0;
    }
  }
}
CONF
nginx -c "$work/nginx.conf"

# bazel-remote: a disk cache in the work directory, HTTP only (no gRPC
# listener), blobs stored uncompressed as cachesvc and nginx store them (its
# default zstd would compress the load generator's repetitive bodies, and
# spend CPU doing it). It always fsyncs each blob file before it answers a
# PUT, and checks every CAS blob's SHA-256 against its key, as cachesvc does.
peers="cachesvc nginx"
br_note="skipped (no binary: pass --bazel-remote PATH or set BAZEL_REMOTE_BIN)"
br_flags=(--max_size 40 --grpc_address none --storage_mode uncompressed --access_log_level none)
if [ -n "$brbin" ]; then
  brport=$(free_port)
  url[bazel-remote]="http://127.0.0.1:$brport"
  "$brbin" --dir "$(data_dir bazel-remote)" --http_address "127.0.0.1:$brport" "${br_flags[@]}" >"$work/bazel-remote.log" 2>&1 &
  pid[bazel-remote]=$!
  pids+=($!)
  peers="cachesvc nginx bazel-remote"
  br_note="$brbin ${br_flags[*]}"
else
  echo "bazel-remote: $br_note" >&2
fi

ready=0
for _ in $(seq 600); do # up to 60 s: a first start compiles the built-in plugins
  ready=1
  for t in cachesvc cachesvc-sync; do curl -fsS "${url[$t]}/readyz" >/dev/null 2>&1 || ready=0; done
  curl -s -o /dev/null "${url[nginx]}/" || ready=0
  [ -n "$brbin" ] && { curl -fsS -o /dev/null "${url[bazel-remote]}/status" 2>/dev/null || ready=0; }
  [ "$ready" = 1 ] && break
  sleep 0.1
done
[ "$ready" = 1 ] || { echo "servers did not start; logs in $work" >&2; cat "$work"/*.log >&2; exit 1; }
# cachesvc compiles its built-in plugins in the background once it listens
# (seconds of CPU on a fresh data dir); a keys request waits for them, so the
# compilation does not overlap the first measurements.
for t in cachesvc cachesvc-sync; do
  curl -s -o /dev/null --max-time 300 -X POST -H 'Content-Type: application/json' \
    --data '{"backend":"xla","module":"HloModule warmup","platform":"cpu"}' "${url[$t]}/v1/bench/keys" || true
done

# CPU time (clock ticks) used so far by the server a run targets: the
# cachesvc or bazel-remote process, or the nginx master and its workers. Per
# request it is what the server costs, which other processes' load on the
# machine disturbs far less than throughput.
server_ticks() {
  local ps
  if [ "$1" = nginx ]; then ps="$(cat "$work/nginx.pid") $(pgrep -P "$(cat "$work/nginx.pid")" | tr '\n' ' ')"; else ps=${pid[$1]}; fi
  for p in $ps; do awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null; done | awk '{s+=$1} END {print s+0}'
}
results="$work/results.jsonl"
round=0
lg() { # lg TARGET LOADGEN-ARGS...: one run, its result (and the server's CPU) appended to $results
  local target=$1 t0 t1 line; shift
  # Every run starts with no dirty page cache: without this, the bytes a
  # server that does not fsync (nginx, cachesvc without --sync-writes) left
  # in memory are written back during the next server's run, on the same
  # disk and cores, so a figure depended on who ran before it.
  sync
  t0=$(server_ticks "$target")
  line=$("$work/loadgen" -target "$target" -url "${url[$target]}" "$@")
  t1=$(server_ticks "$target")
  python3 -c 'import json,sys,os; r=json.loads(sys.argv[1]); hz=os.sysconf("SC_CLK_TCK"); r["server_cpu_s"]=(int(sys.argv[3])-int(sys.argv[2]))/hz; r["round"]=int(sys.argv[4]); print(json.dumps(r))' \
    "$line" "$t0" "$t1" "$round" >>"$results"
  tail -n1 "$results" >&2
}
each() { # each "TARGETS" LOADGEN-ARGS...: the same run against each target, in turn
  local ts=$1 t; shift
  for t in $ts; do lg "$t" "$@"; done
}
# drop_page_cache "TARGETS": writes the servers' files back and drops them
# from the page cache (POSIX_FADV_DONTNEED), so their next reads come from
# disk. Pages a process has mapped stay, so this runs right after an upload,
# before anything has read the files.
drop_page_cache() {
  local t dirs=()
  for t in $1; do dirs+=("$(data_dir "$t")"); done
  sync
  python3 - "${dirs[@]}" <<'PY'
import os, sys
for top in sys.argv[1:]:
    for d, _, files in os.walk(top):
        for f in files:
            try:
                fd = os.open(os.path.join(d, f), os.O_RDONLY)
            except OSError:  # removed meanwhile, or not a regular file
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
PY
}
# rotate "A B C" N: the list rotated left by N, so that no server always runs first in a round.
rotate() { python3 -c 'import sys; t=sys.argv[1].split(); n=int(sys.argv[2])%len(t); print(" ".join(t[n:]+t[:n]))' "$1" "$2"; }

# A signature for the canonical lookups, known to the server (the keys request
# teaches its memo, as a trainer's first lookup does) and with an entry stored
# under its key: the corpus' largest module or a generated one.
sig_for() { # sig_for KIND ARG: prints the signature file, or nothing
  local kind=$1 arg=$2 sig="$work/sig-$1.json" k
  if [ ! -f "$sig" ]; then
    if [ "$kind" = corpus ]; then
      [ -n "$arg" ] || { echo "no corpus beside the checkout; skipping the corpus lookup" >&2; return 0; }
      "$work/gensig" -module "$arg" -o "$sig"
    else
      "$work/gensig" -size "$arg" -o "$sig"
    fi
    k=$(curl -sS --fail-with-body -X POST -H 'Content-Type: application/json' --data-binary "@$sig" "${url[cachesvc]}/v1/bench/keys" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
    head -c 65536 /dev/urandom >"$work/exe.bin"
    curl -fsS -o /dev/null -X PUT --data-binary "@$work/exe.bin" "${url[cachesvc]}/v1/bench/entries/$k"
  fi
  echo "$sig"
}

# --- The peers table: the headline figures, in interleaved rounds ----------
# Each round runs every figure against every server, the servers' order
# rotated from round to round; the report takes each figure's median.
n4k=1000; n16m=16; put16m=32
[ "$quick" = 1 ] && n4k=200 && put16m=8
results="$work/peers.jsonl"
each "$peers" -mode preload -size 4096 -entries "$n4k" -c 4 -name preload >/dev/null
each "$peers" -mode preload -size 16777216 -entries "$n16m" -c 4 -name preload >/dev/null
sig10=$(sig_for generated-10MiB 10MiB)
crashsafe="cachesvc-sync"; [ -n "$brbin" ] && crashsafe="cachesvc-sync bazel-remote"
for round in $(seq "$rounds"); do
  echo "peers: round $round of $rounds" >&2
  each "$(rotate "$peers" "$round")" -mode get -size 4096 -entries "$n4k" -c 32 -d "${dur}s" -name get-4k-c32
  each "$(rotate "$peers" "$round")" -mode get -size 16777216 -entries "$n16m" -c 8 -d "${dur}s" -name get-16m-c8
  each "$(rotate "$crashsafe" "$round")" -mode put -size 4096 -c 8 -d "${dur}s" -seed "put4k-r$round" -name put-4k-c8-sync
  # 16 MiB uploads run by count (a few per connection: fixed disk use per
  # round), bounded by 300 s.
  each "$(rotate "$peers" "$round")" -mode put -size 16777216 -c 4 -n "$put16m" -d 300s -seed "put16m-r$round" -name put-16m-c4
  each "$(rotate "$crashsafe" "$round")" -mode put -size 16777216 -c 4 -n "$put16m" -d 300s -seed "put16m-sync-r$round" -name put-16m-c4-sync
  lg cachesvc -mode lookup -digest -signature "$sig10" -size "$(stat -c %s "$sig10")" -c 1 -d "${dur}s" -name lookup-10m-digest
  lg cachesvc -mode lookup -signature "$sig10" -size "$(stat -c %s "$sig10")" -c 1 -d "${dur}s" -name lookup-10m-full
done
round=0
results="$work/results.jsonl"
: >"$results"

# --- The scenario table: sizes x concurrency, once each ----------------------
if [ "$peers_only" = 0 ]; then
  sizes="4096:1000 1048576:100 67108864:8"
  concs="1 16 64"
  [ "$quick" = 1 ] && sizes="4096:200 1048576:20 67108864:2" && concs="1 16"
  for se in $sizes; do
    size=${se%%:*}; n=${se##*:}
    each "$peers" -mode preload -size "$size" -entries "$n" -c 4 -name "preload-$size" >/dev/null
    # Large entries run by count, not by time: a window of a few seconds holds
    # only a handful of 64 MiB transfers, and a cut-off one is not counted.
    # At least one transfer per connection, so that every connection is busy.
    large=0; [ "$size" -ge 67108864 ] && large=1
    bound() { if [ "$large" = 1 ]; then echo "-d 300s -n $(( $1 > (quick ? 4 : 24) ? $1 : (quick ? 4 : 24) ))"; else echo "-d ${dur}s"; fi; }
    # The first read of each entry after its upload, from disk on every
    # server: cachesvc writes values of 256 KiB or more past the page cache
    # (third_party/patches/badger-0004), nginx and bazel-remote through it, so
    # without the drop cachesvc's first reads would come from disk and the
    # peers' from memory. The timed runs below then read warm on every server.
    if [ "$size" -ge 1048576 ]; then
      drop_page_cache "$peers"
      each "$peers" -mode get -size "$size" -entries "$n" -c 1 -n "$n" -d 300s -name "get-$size-c1-first"
    fi
    for c in $concs; do
      # shellcheck disable=SC2046
      each "$peers" -mode get -size "$size" -entries "$n" -c "$c" $(bound "$c")
    done
    # shellcheck disable=SC2046
    each "$peers" -mode put -size "$size" -c 4 $(bound 4) -seed "put-$size"
  done

  # Canonical lookups (hit): the corpus' largest module and generated ones.
  largest=$(ls -S "$root/../shared/corpus"/hlo/*.hlo "$root/../shared/corpus"/stablehlo/*.mlir 2>/dev/null | head -n1 || true)
  for spec in "corpus:$largest" "generated-1MiB:1MiB" "generated-10MiB:10MiB"; do
    sig=$(sig_for "${spec%%:*}" "${spec#*:}")
    [ -n "$sig" ] || continue
    lg cachesvc -mode lookup -signature "$sig" -size "$(stat -c %s "$sig")" -c 1 -d "${dur}s" -name "lookup-${spec%%:*}"
  done

  # One batch request of 1,000 x 64 KiB against 1,000 sequential GETs.
  bn=1000; [ "$quick" = 1 ] && bn=200
  each "cachesvc nginx" -mode preload -size 65536 -entries "$bn" -c 4 -name preload-64k >/dev/null
  lg cachesvc -mode batch -size 65536 -entries "$bn" -batch "$bn" -d "${dur}s" -name batch-64k
  each "cachesvc nginx" -mode seq -size 65536 -entries "$bn" -d "${dur}s" -name seq-64k
fi

cat >"$work/meta.json" <<META
{"rounds": $rounds, "duration_s": $dur, "quick": $quick, "peers_only": $peers_only,
 "seconds": $(( $(date +%s) - started )), "loadavg_before": "$loadavg_before",
 "loadavg_after": "$(cut -d' ' -f1-3 /proc/loadavg)",
 "bazel_remote": $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$br_note")}
META
python3 "$root/scripts/bench/report.py" "$work/peers.jsonl" "$results" "$work/meta.json" "$out"
echo "wrote $out in $(( $(date +%s) - started )) s" >&2
