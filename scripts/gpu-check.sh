#!/usr/bin/env bash
# scripts/gpu-check.sh: the GPU end-to-end check of the compile cache (never run
# by CI; one run takes 3-8 minutes: process A autotunes every GEMM, about 30 s
# each on an H200 with torch 2.11).
#
# For a GPU machine that has torch (with Triton) and JAX with CUDA installed and
# reaches no package registry. Needs only this checkout's clients/python and a
# prebuilt cachesvc binary:
#
#   go build -o build/cachesvc ./cmd/cachesvc     # beforehand, on a machine with Go
#   scripts/gpu-check.sh [path/to/cachesvc]       # default: build/cachesvc
#
# It starts `cachesvc serve` on 127.0.0.1 with an empty data directory, then
#   torch: process A (cold) and process B (empty local caches: remote hits) of a
#          small matmul model under torch.compile(mode="max-autotune-no-cudagraphs"):
#          Triton kernels (bundled into the FX graph entries) and GEMM autotuning;
#   jax:   process A and B of clients/python/tests/jaxprog.py mlp on the GPU;
# and prints, per process, compiles, hits and the time to the first result.
#
# Environment: PYTHON (default python3), GPU_CHECK_STEP_TIMEOUT (seconds per
# process, default 420), GPU_CHECK_KEEP=1 keeps the work directory.
# Exit codes: 0 all checks passed, 1 a check failed, 77 skipped (no GPU, or
# torch/JAX without CUDA: says which), 2 usage (no binary).
set -uo pipefail
# Answered before anything runs: --help from the comment above, without its
# "# "; any other option is a mistake, not the binary's path.
case "${1:-}" in
-h | --help) sed -n '2,/^set -/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
-*) echo "gpu-check: unknown option $1 (try --help)" >&2; exit 2 ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
STEP_TIMEOUT="${GPU_CHECK_STEP_TIMEOUT:-420}"
BIN="${1:-$ROOT/build/cachesvc}"
PYDIR="$ROOT/clients/python"

say() { printf '\n\033[1m=== %s ===\033[0m\n' "$*"; }

if [[ ! -x "$BIN" ]]; then
	echo "gpu-check: no cachesvc binary at $BIN; build one first: go build -o build/cachesvc ./cmd/cachesvc" >&2
	exit 2
fi
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "gpu-check: SKIPPED: no NVIDIA GPU here (nvidia-smi missing or lists none); this check needs one"
	exit 77
fi
nvidia-smi -L
TORCH_OK=0 JAX_OK=0
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	TORCH_OK=1
else
	echo "gpu-check: torch is missing or sees no CUDA device ($PY -c 'import torch; print(torch.cuda.is_available())'): torch part skipped"
fi
if "$PY" -c 'import jax, sys; sys.exit(0 if jax.devices("gpu") else 1)' 2>/dev/null; then
	JAX_OK=1
else
	echo "gpu-check: JAX is missing or has no GPU backend (jax.devices('gpu') failed): JAX part skipped"
fi
if ((TORCH_OK == 0 && JAX_OK == 0)); then
	echo "gpu-check: SKIPPED: neither torch nor JAX can use the GPU"
	exit 77
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")"
SERVER_PID=""
cleanup() {
	[[ -n "$SERVER_PID" ]] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
	[[ "${GPU_CHECK_KEEP:-0}" == 1 ]] && echo "work directory kept: $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT

say "cachesvc serve ($BIN)"
"$BIN" serve --addr 127.0.0.1:0 --data "$WORK/data" --log-format text >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
URL=""
for _ in $(seq 1 600); do
	URL="$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$WORK/server.log" | head -1 || true)"
	[[ -n "$URL" ]] && "$PY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/readyz", timeout=2)' "$URL" 2>/dev/null && break
	kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log"; echo "gpu-check: the server exited"; exit 1; }
	URL=""
	sleep 0.1
done
[[ -n "$URL" ]] || { cat "$WORK/server.log"; echo "gpu-check: the server never became ready"; exit 1; }
echo "serving on $URL"

# run NAME CMD...: one process with fresh local caches; its last stdout line -> $WORK/NAME.json
run() {
	local name="$1"
	shift
	local d="$WORK/$name"
	mkdir -p "$d/inductor" "$d/triton"
	local start=$SECONDS rc=0
	env -u TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE -u TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE -u JAX_COMPILATION_CACHE_DIR \
		PYTHONPATH="$PYDIR" TORCHINDUCTOR_CACHE_DIR="$d/inductor" TRITON_CACHE_DIR="$d/triton" \
		CACHESVC_URL="$URL" CACHESVC_NAMESPACE=gpu-check \
		timeout "$STEP_TIMEOUT" "$@" >"$d/stdout" 2>"$d/stderr" || rc=$?
	tail -1 "$d/stdout" >"$WORK/$name.json" 2>/dev/null || true
	echo "$name: exit $rc after $((SECONDS - start))s"
	if ((rc != 0)); then
		tail -30 "$d/stderr"
		return 1
	fi
}

FAILED=0
if ((TORCH_OK)); then
	say "torch: process A (cold), then B (remote hits)"
	run torch-A "$PY" "$PYDIR/tests_torch/gpuprog.py" --url "$URL" --ns gpu-check --run gpu-check --save --dump "$WORK/torch-A.pt" || FAILED=1
	run torch-B "$PY" "$PYDIR/tests_torch/gpuprog.py" --url "$URL" --ns gpu-check --dump "$WORK/torch-B.pt" || FAILED=1
fi
if ((JAX_OK)); then
	say "jax: process A (cold), then B (remote hits)"
	run jax-A env JAX_PLATFORMS=cuda "$PY" "$PYDIR/tests/jaxprog.py" mlp || FAILED=1
	run jax-B env JAX_PLATFORMS=cuda "$PY" "$PYDIR/tests/jaxprog.py" mlp || FAILED=1
fi

say "summary"
"$PY" - "$WORK" "$PYDIR/tests_torch" <<'PY' || FAILED=1
import json, os, sys
work = sys.argv[1]
sys.path.insert(0, sys.argv[2])
def load(n):
    try:
        with open(os.path.join(work, n + ".json")) as f:
            return json.loads(f.read())
    except Exception:
        return None
bad = []
a, b = load("torch-A"), load("torch-B")
if a and b:
    for name, o in (("torch A", a), ("torch B", b)):
        ind, aot, s = o["inductor"], o["aot_autograd"], o["stats"]
        print(f"{name}: {o['device']}: first step {o['first_step_seconds']:.2f}s, process {o['process_seconds']:.1f}s; "
              f"FX graphs hit/miss {ind.get('fxgraph_cache_hit', 0)}/{ind.get('fxgraph_cache_miss', 0)}, "
              f"AOTAutograd hit/miss {aot.get('autograd_cache_hit', 0)}/{aot.get('autograd_cache_miss', 0)}; "
              f"cachesvc lookups {s['lookups']} hits {s['hits']} errors {s['errors']} puts {s['puts']} "
              f"read {s['hit_bytes']} B written {s['put_bytes']} B")
        print(f"    by cache: {json.dumps(s['by_cache'])}")
        # A kernel's autotune record is saved twice (winner, then coordinate descent's config):
        # the client writes the last one, so superseded > 0 and no 409 (put_conflicts) for them.
        print(f"    autotune records superseded before their write {s.get('autotune_superseded', 'n/a')}, "
              f"held after the flush {s.get('autotune_held', 'n/a')}; put_conflicts {s['put_conflicts']}")
    if b["inductor"].get("fxgraph_cache_miss", 0) or not b["inductor"].get("fxgraph_cache_hit"):
        bad.append("torch B compiled FX graphs (expected only remote hits)")
    from gpuprog import REL_TOLERANCE, compare
    identical, worst, differ = compare(os.path.join(work, "torch-A.pt"), os.path.join(work, "torch-B.pt"))
    if identical:
        print("torch B's outputs and gradients are bitwise A's")
    elif worst <= REL_TOLERANCE:
        print(f"torch B: {', '.join(differ)} differ from A's in the last bits (at most {worst:.3g} relative): "
              "B ran A's kernels but chose some launch configs anew (see autotune misses below)")
    else:
        bad.append(f"torch B's {', '.join(differ)} differ from A's by up to {worst:.3g} (relative), "
                   f"above {REL_TOLERANCE:g}")
    tuned_a = {m for m in a.get("misses", []) if m.startswith("autotune ")}
    retuned = [m for m in b.get("misses", []) if m.startswith("autotune ")]
    print(f"torch A: autotune lookups {sorted(tuned_a)}")
    if retuned:
        print(f"torch B: {len(retuned)} autotune lookups missed, {sum(m in tuned_a for m in retuned)} of them "
              f"keys A had looked up and stored: {retuned}")
        # torch's key is pt2:<digest of torch, Triton and the kernel's configs>::<digest of the
        # kernel file>:c1. A miss on a kernel file A saved under another cache id means B hashed
        # other configs for the same kernel (a static autotuner's recheck hashes its compiled configs).
        saved_a = set(a.get("autotune_saved", []))
        files_a = {k.split("::", 1)[1] for k in saved_a}
        keys_b = [m.split(" ", 1)[1] for m in retuned]
        same = sum(k in saved_a for k in keys_b)
        other_id = sum(k not in saved_a and k.split("::", 1)[-1] in files_a for k in keys_b)
        print(f"torch A saved {len(saved_a)} autotune records; B's misses: {same} under a key A saved, "
              f"{other_id} for a kernel file A saved under another cache id (other configs hashed), "
              f"{len(keys_b) - same - other_id} for kernel files A saved nothing for")
        kernels_b = b.get("autotune_kernels", {})
        for k in keys_b:
            print(f"    B missed {k[:40]}...: {kernels_b.get(k, 'kernel not seen')}")
    if not a.get("mega_saved"):
        bad.append("torch A saved no Mega-Cache")
elif os.path.exists(os.path.join(work, "torch-A")):
    bad.append("torch: a process printed no result")
ja, jb = load("jax-A"), load("jax-B")
if ja and jb:
    for name, o in (("jax A", ja), ("jax B", jb)):
        s = o.get("stats", {})
        print(f"{name}: XLA compiles {o['real_compiles']}, cache hits {o['cache_hits']}, "
              f"wall {o['wall_secs']:.2f}s; cachesvc hits {s.get('hits')} misses {s.get('misses')}")
    if jb["real_compiles"] != 0:
        bad.append(f"jax B compiled {jb['real_compiles']} programs (expected 0)")
elif os.path.exists(os.path.join(work, "jax-A")):
    bad.append("jax: a process printed no result")
for m in bad:
    print("FAIL:", m)
sys.exit(1 if bad else 0)
PY
if ((FAILED)); then
	echo "gpu-check: FAILED"
	exit 1
fi
echo "gpu-check: passed"
