#!/usr/bin/env bash
# Benchmarks cachesvc against a baseline nginx (static files with sendfile,
# WebDAV PUT) on loopback, in one run on one machine, and writes BENCHMARKS.md.
#
#   scripts/bench/run.sh [-d SECONDS] [-o BENCHMARKS.md] [--quick]
#
# Both servers get the same blobs, the same load generator and the same
# concurrency; the report gives each figure for both and their ratio.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

dur=5
out="$root/BENCHMARKS.md"
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    -d) dur="$2"; shift 2 ;;
    -o) out="$2"; shift 2 ;;
    --quick) quick=1; dur=2; shift ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done

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

csport=$(free_port)
ngport=$(free_port)
cs="http://127.0.0.1:$csport"
ng="http://127.0.0.1:$ngport"

# Request logs off on both sides: nginx runs with access_log off, so cachesvc
# logs warnings and errors only (at info it writes one JSON line, one write
# system call, per request). --pprof-addr lets a run be profiled
# (go tool pprof http://127.0.0.1:$ppport/debug/pprof/profile).
ppport=$(free_port)
"$work/cachesvc" serve --addr "127.0.0.1:$csport" --data "$work/cachesvc-data" --log-format json --log-level warn \
  --pprof-addr "127.0.0.1:$ppport" >"$work/cachesvc.log" 2>&1 &
cspid=$!
pids+=($cspid)

mkdir -p "$work/www/blobs" "$work/nginx-tmp"
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
    root $work/www;
    location /blobs/ {
      dav_methods PUT;
      create_full_put_path on;
      client_max_body_size 0;
    }
  }
}
CONF
nginx -c "$work/nginx.conf"

ready=0
for _ in $(seq 600); do # up to 60 s: a first start compiles the built-in plugins
  if curl -fsS "$cs/readyz" >/dev/null 2>&1 && curl -s -o /dev/null "$ng/"; then ready=1; break; fi
  sleep 0.1
done
[ "$ready" = 1 ] || { echo "servers did not start; logs in $work" >&2; cat "$work"/*.log >&2; exit 1; }
# cachesvc compiles its built-in plugins in the background once it listens
# (seconds of CPU on a fresh data dir); a keys request waits for them, so the
# compilation does not overlap the first measurements.
curl -s -o /dev/null --max-time 300 -X POST -H 'Content-Type: application/json' \
  --data '{"backend":"xla","module":"HloModule warmup","platform":"cpu"}' "$cs/v1/bench/keys" || true

results="$work/results.jsonl"
# CPU time (clock ticks) used so far by the server a run targets: the
# cachesvc process, or the nginx master and its workers. Per request it is
# what the server costs, which other processes' load on the machine disturbs
# far less than throughput.
server_ticks() {
  local ps
  if [ "$1" = cachesvc ]; then ps=$cspid; else ps="$(cat "$work/nginx.pid") $(pgrep -P "$(cat "$work/nginx.pid")" | tr '\n' ' ')"; fi
  for p in $ps; do awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null; done | awk '{s+=$1} END {print s+0}'
}
lg() {
  local target=$2 t0 t1 line
  t0=$(server_ticks "$target")
  line=$("$work/loadgen" "$@")
  t1=$(server_ticks "$target")
  python3 -c 'import json,sys,os; r=json.loads(sys.argv[1]); hz=os.sysconf("SC_CLK_TCK"); r["server_cpu_s"]=(int(sys.argv[3])-int(sys.argv[2]))/hz; print(json.dumps(r))' "$line" "$t0" "$t1" >>"$results"
  tail -n1 "$results" >&2
}
both() { # both MODE ARGS...: the same run against cachesvc and nginx
  lg -target cachesvc -url "$cs" "$@"
  lg -target nginx -url "$ng" "$@"
}

sizes="4096:1000 1048576:100 67108864:8"
concs="1 16 64"
[ "$quick" = 1 ] && sizes="4096:200 1048576:20 67108864:2" && concs="1 16"

for se in $sizes; do
  size=${se%%:*}; n=${se##*:}
  both -mode preload -size "$size" -entries "$n" -c 4 -name "preload-$size" >/dev/null
  # Large entries run by count, not by time: a window of a few seconds holds
  # only a handful of 64 MiB transfers, and a cut-off one is not counted.
  # At least one transfer per connection, so that every connection is busy.
  large=0; [ "$size" -ge 67108864 ] && large=1
  bound() { if [ "$large" = 1 ]; then echo "-d 300s -n $(( $1 > (quick ? 4 : 24) ? $1 : (quick ? 4 : 24) ))"; else echo "-d ${dur}s"; fi; }
  for c in $concs; do
    # shellcheck disable=SC2046
    both -mode get -size "$size" -entries "$n" -c "$c" $(bound "$c")
  done
  # shellcheck disable=SC2046
  both -mode put -size "$size" -c 4 $(bound 4) -seed "put-$size"
done

# Canonical lookups (hit): the corpus' largest module and a generated 10 MiB one.
corpus="$root/../shared/corpus"
largest=$(ls -S "$corpus"/hlo/*.hlo "$corpus"/stablehlo/*.mlir 2>/dev/null | head -n1 || true)
for spec in "corpus:$largest" "generated-1MiB:1MiB" "generated-10MiB:10MiB"; do
  kind=${spec%%:*}; arg=${spec#*:}
  sig="$work/sig-$kind.json"
  if [ "$kind" = corpus ]; then
    [ -n "$arg" ] || { echo "no corpus beside the checkout; skipping the corpus lookup" >&2; continue; }
    "$work/gensig" -module "$arg" -o "$sig"
  else
    "$work/gensig" -size "$arg" -o "$sig"
  fi
  k=$(curl -sS --fail-with-body -X POST -H 'Content-Type: application/json' --data-binary "@$sig" "$cs/v1/bench/keys" | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
  head -c 65536 /dev/urandom >"$work/exe.bin"
  curl -fsS -o /dev/null -X PUT --data-binary "@$work/exe.bin" "$cs/v1/bench/entries/$k"
  lg -target cachesvc -url "$cs" -mode lookup -signature "$sig" -size "$(stat -c %s "$sig")" -c 1 -d "${dur}s" -name "lookup-$kind"
done

# One batch request of 1,000 x 64 KiB against 1,000 sequential GETs.
bn=1000; [ "$quick" = 1 ] && bn=200
both -mode preload -size 65536 -entries "$bn" -c 4 -name preload-64k >/dev/null
lg -target cachesvc -url "$cs" -mode batch -size 65536 -entries "$bn" -batch "$bn" -name batch-64k
both -mode seq -size 65536 -entries "$bn" -name seq-64k

python3 "$root/scripts/bench/report.py" "$results" "$out" "$work/cachesvc" 
echo "wrote $out" >&2
