"""Measures cachesvc.torch: a cold process A, a process B that gets remote hits,
and a baseline without any remote cache, each a fresh interpreter with an empty
TORCHINDUCTOR_CACHE_DIR running tests_torch/torchprog.py (a two-block MLP,
forward and backward); then the client's cost of one lookup that misses.

    python bench/bench_torch.py --bin /path/to/cachesvc [--rounds 3] [--misses 300]

Prints, per process (times: medians over the rounds): time of the first training step (compile included), C++
compiler runs (counted by a wrapper passed as $CXX; "compiles" are the runs
with a source file, the rest are version probes), lookups, hits, bytes read
and written, and time spent in lookups. Then p50/p99 of one missing lookup
(``Service.get`` on a new FX graph key with components, kept-alive
connection): torch without a remote cache spends nothing there.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

PY_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PY_DIR))
PROG = PY_DIR / "tests_torch" / "torchprog.py"


def server_class():
    """The tests' Server (clients/python/tests/conftest.py), loaded by path."""
    spec = importlib.util.spec_from_file_location("cachesvc_tests_conftest", PY_DIR / "tests" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.Server


def run_process(url: str, ns: str, mode: str, work: Path, cxx: str, name: str) -> dict:
    """One torchprog run with an empty cache dir; its JSON result."""
    d = work / f"inductor-{name}"
    d.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "CACHESVC_"))}
    env.update({"PYTHONPATH": str(PY_DIR), "TORCHINDUCTOR_CACHE_DIR": str(d), "CXX": cxx,
                "CACHESVC_CXX_LOG": str(d / "cxx.log")})
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, str(PROG), "--url", url, "--ns", ns, "--mode", mode],
                         env=env, capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        raise SystemExit(f"{name} failed:\n{res.stderr[-4000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out["wall_seconds"] = time.monotonic() - t0
    return out


def miss_overhead(url: str, n: int) -> tuple[float, float]:
    """p50, p99 (ms) of Service.get for a key the server does not hold."""
    from cachesvc import Client
    from cachesvc._failopen import Breaker
    from cachesvc.torch import _keys
    from cachesvc.torch._service import Service

    comps = _keys.ComponentMap()
    svc = Service(Client(url, namespace="bench-miss", timeout=10, retries=2), timeout=10.0, put_timeout=None,
                  breaker=Breaker(3, 30), warn_interval=60, components=comps, background_uploads=False,
                  upload_queue_bytes=1 << 20, flush_at_exit=1)
    lines = ["[aaaa] gm: <graph>", "[bbbb] example_inputs[0]: TensorMetadata(device=device(type='cpu'))",
             "[cccc] inductor_config: {...}", "[dddd] torch_version: <bytes>", "[eeee] system_info: {...}"]
    times = []
    for i in range(n + 20):
        k = "f" + uuid.uuid4().hex + uuid.uuid4().hex[:20]
        comps.record(k, lines)
        t0 = time.perf_counter()
        assert svc.get(f"pt2:fx-graph-v1::{k}:c1") is None
        if i >= 20:  # warm-up: connections, plugin instances
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


def main() -> None:
    """Runs the rounds and prints the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="a built cachesvc binary")
    ap.add_argument("--misses", type=int, default=300, help="lookups in the miss-overhead measurement")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the three processes (times: medians)")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-torch-"))
    real = shutil.which(os.environ.get("CXX") or "g++")
    if real is None:
        raise SystemExit("no g++")
    cxx = work / "g++"
    cxx.write_text(f'#!/bin/sh\nprintf \'%s\\n\' "$*" >> "${{CACHESVC_CXX_LOG:-/dev/null}}"\nexec {real} "$@"\n')
    cxx.chmod(0o755)
    srv = server_class()(a.bin, work / "data").wait_ready()
    try:
        # A warm-up process first (not reported): the first interpreter after a
        # while pays cold OS file caches for torch's imports.
        run_process(srv.url, "warmup", "none", work, str(cxx), "warmup")
        rounds = []
        for r in range(a.rounds):
            rounds.append([("no remote cache", run_process(srv.url, f"b{r}", "none", work, str(cxx), f"none{r}")),
                           ("A (cold)", run_process(srv.url, f"b{r}", "remote", work, str(cxx), f"A{r}")),
                           ("B (remote hits)", run_process(srv.url, f"b{r}", "remote", work, str(cxx), f"B{r}"))])
        rows = rounds[-1]
        for i, (_, o) in enumerate(rows):  # medians over the rounds for the times
            for k in ("first_step_seconds", "wall_seconds"):
                o[k] = statistics.median(rr[i][1][k] for rr in rounds)
        p50, p99 = miss_overhead(srv.url, a.misses)
    finally:
        srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'process':<18} {'first step':>10} {'wall':>6} {'c++ runs':>8} {'compiles':>8} {'lookups':>7} "
          f"{'hits':>5} {'read':>9} {'written':>9} {'lookup s':>8}  fx hit/miss  aot hit/miss")
    for name, o in rows:
        s, ind, aot = o["stats"], o["inductor"], o["aot_autograd"]
        print(f"{name:<18} {o['first_step_seconds']:>9.2f}s {o['wall_seconds']:>5.1f}s {o['cxx'].get('all', 0):>8} "
              f"{o['cxx'].get('compiles', 0):>8} {s.get('lookups', 0):>7} {s.get('hits', 0):>5} "
              f"{s.get('hit_bytes', 0):>9} {s.get('put_bytes', 0):>9} {s.get('lookup_seconds', 0):>8.3f}  "
              f"{ind.get('fxgraph_cache_hit', 0)}/{ind.get('fxgraph_cache_miss', 0):<9} "
              f"{aot.get('autograd_cache_hit', 0)}/{aot.get('autograd_cache_miss', 0)}")
        if s.get("by_cache"):
            print(f"{'':<18} by cache: {json.dumps(s['by_cache'])}")
    print(f"one missing lookup (Service.get, FX graph key + components): p50 {p50:.2f} ms, p99 {p99:.2f} ms "
          f"over {a.misses} keys; without a remote cache torch spends 0 there")


if __name__ == "__main__":
    main()
