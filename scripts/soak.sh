#!/usr/bin/env bash
# Soak test (not run by CI): builds cachesvc, serves it on loopback with a
# fresh data directory and a tokens file, and drives it for N minutes with a
# bounded mix of PUT, GET, lookup, batch, exists and keys requests
# (scripts/soak/main.go). Prints per minute the requests, errors, p50/p99
# latency and the server's RSS; exits non-zero if any request failed or the
# server died.
#
#   scripts/soak.sh                 # 10 minutes
#   scripts/soak.sh --minutes 2 --rps 300 --workers 16
#
# --minutes N, when given, comes first; every other flag is passed to the
# load program (listed by --help). CACHESVC_SOAK_MINUTES sets the default
# duration.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
-h | --help)
  sed -n '2,14p' scripts/soak.sh | sed 's/^# \{0,1\}//'
  echo
  echo "Load program flags:"
  go run ./scripts/soak -help 2>&1 | tail -n +2
  exit 0
  ;;
esac

minutes=${CACHESVC_SOAK_MINUTES:-10}
if [[ ${1:-} == --minutes ]]; then
  minutes=$2
  shift 2
fi

work=$(mktemp -d /tmp/cachesvc-soak.XXXXXX)
server_pid=
cleanup() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "soak: building into $work"
go build -o "$work/cachesvc" ./cmd/cachesvc
go build -o "$work/soak" ./scripts/soak

# A token with write access to the soak namespace, so that the soak runs
# through authentication as a deployment would.
# Its stderr (advice to keep the token) is kept with stdout, shown only on failure.
token_out=$("$work/cachesvc" token new --name soak --scopes soak:write 2>&1)
token=$(sed -n 's/^token: //p' <<<"$token_out")
sed -n 's/^line: //p' <<<"$token_out" >"$work/tokens"
[[ -n $token && -s $work/tokens ]] || { echo "soak: could not make a token:"; echo "$token_out"; exit 2; }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$work/cachesvc" serve --addr "127.0.0.1:$port" --data "$work/data" --tokens "$work/tokens" \
  --log-level warn --log-format json >"$work/server.log" 2>&1 &
server_pid=$!
# /healthz answers {"status":"starting"} while the store opens: wait for "ok".
for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$port/healthz" 2>/dev/null | grep -q '"status":"ok"' && break
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/healthz" | grep -q '"status":"ok"' || { echo "soak: server did not start:"; cat "$work/server.log"; exit 2; }

status=0
CACHESVC_TOKEN=$token "$work/soak" -url "http://127.0.0.1:$port" -pid "$server_pid" -minutes "$minutes" "$@" || status=$?

if ! kill -0 "$server_pid" 2>/dev/null; then
  echo "soak: the server died:"; tail -20 "$work/server.log"; exit 1
fi
errors=$(grep -c '"level":"ERROR"' "$work/server.log" || true)
echo "soak: server logged $errors errors; data dir $(du -sh "$work/data" | cut -f1)"
if [[ $errors -gt 0 ]]; then
  grep '"level":"ERROR"' "$work/server.log" | head -5
  status=1
fi
exit $status
