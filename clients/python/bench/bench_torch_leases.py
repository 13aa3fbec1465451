"""Measures cachesvc.torch's compile leases: N training processes
(tests_torch/torchprog.py, each a fresh interpreter with an empty
TORCHINDUCTOR_CACHE_DIR) install, wait at a barrier, then start training at
the same moment on an empty namespace, with leases and without, rounds
alternating the order.

    python bench/bench_torch_leases.py --bin /path/to/cachesvc [--procs 4] [--rounds 2]

Prints one JSON line per run: wall seconds from the start until every process
finished, the processes' CPU seconds over that span, FX graph compiles in all
(torch's fxgraph_cache_miss), each process's first training step, and the
lease waits.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The tests' Server, the program and its paths are bench_torch's (this folder is
# on sys.path when a script here runs).
from bench_torch import PROG, PY_DIR, server_class


def together(url: str, ns: str, procs: int, leases: bool, work: Path) -> dict:
    """Runs procs torchprog processes that start training together."""
    barrier = work / f"barrier-{ns}"
    barrier.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "CACHESVC_"))}
    env["PYTHONPATH"] = str(PY_DIR)
    args = ["--leases", "--lease-wait", "280"] if leases else []
    ps = [subprocess.Popen([sys.executable, str(PROG), "--url", url, "--ns", ns, "--barrier", str(barrier), *args],
                           env=dict(env, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(dir=work)),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(procs)]
    deadline = time.monotonic() + 300
    while len(list(barrier.glob("ready-*"))) < procs:
        if time.monotonic() > deadline or any(p.poll() is not None for p in ps):
            raise SystemExit("a training process exited or never got ready")
        time.sleep(0.05)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    (barrier / "go").touch()
    outs = [p.communicate(timeout=600) for p in ps]
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for p, (_, err) in zip(ps, outs):
        if p.returncode != 0:
            raise SystemExit(f"a training process failed:\n{err[-4000:]}")
    js = [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]
    return {
        "leases": leases,
        "procs": procs,
        "wall_s": round(wall, 1),
        "cpu_s": round((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 1),
        "fx_compiles": sum(j["inductor"].get("fxgraph_cache_miss", 0) for j in js),
        "first_step_s": [round(j["first_step_seconds"], 1) for j in js],
        "lease_waits": sum(j["stats"]["lease_waits"] for j in js),
    }


def main() -> None:
    """Parses the arguments, starts a server, runs the rounds."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="the cachesvc binary")
    ap.add_argument("--procs", type=int, default=4, help="processes started together")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        srv = server_class()(a.bin, work / "data").wait_ready()
        try:
            for r in range(a.rounds):
                for leases in ((True, False) if r % 2 == 0 else (False, True)):
                    row = together(srv.url, f"r{r}{'l' if leases else 'n'}", a.procs, leases, work)
                    print(json.dumps(dict(round=r, **row)), flush=True)
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
