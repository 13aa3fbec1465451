"""Fail fast with torch.compile: a hung server (SIGSTOP: connections are
accepted, nothing answers) costs a training process at most ~3 s compared
with no cache. Two processes (a torch compile takes ~15 s here): no cache,
then the stopped server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

from conftest import sigstop


def test_stopped_server_costs_torch_at_most_3s(start_server: Any, run_torch: Any) -> None:
    srv = start_server()
    # The first torch process of a session pays cold imports (page cache):
    # pay them here, so that neither measured process does.
    subprocess.run([sys.executable, "-c", "import torch, torch._inductor.compile_fx"], check=True, timeout=300)
    t0 = time.monotonic()
    ref = run_torch("", "none", "--mode", "none")
    base = time.monotonic() - t0
    sigstop(srv.proc.pid)
    try:
        t0 = time.monotonic()
        r = run_torch(srv.url, "failfast")
        wall = time.monotonic() - t0
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
    print(f"torch: no cache {base:.2f}s (import {ref.out['import_seconds']:.1f}s, first step "
          f"{ref.out['first_step_seconds']:.1f}s), stopped server {wall:.2f}s (import "
          f"{r.out['import_seconds']:.1f}s, first step {r.out['first_step_seconds']:.1f}s)")
    o = r.out
    assert o["digests"] == ref.out["digests"]
    # the same graphs compiled, none served from the (hung) server
    assert o["inductor"].get("fxgraph_cache_miss", 0) == ref.out["inductor"].get("fxgraph_cache_miss", 0) > 0, \
        (o["inductor"], ref.out["inductor"])
    s = o["stats"]
    assert s["hits"] == 0 and s["errors"] >= 1 and s["skipped"] >= 1 and s["breaker_open"] is True, s
    assert len(r.warnings()) == 1, r.warnings()
    # What the cache itself cost, independent of the order of the two
    # processes (the first one still pays cold g++ header reads: the no-cache
    # process, which makes the wall-time bound below lenient).
    assert s["lookup_seconds"] + s["put_seconds"] < 3.0, s
    # The wall times of two 40 s CPU compiles differ by far more than 3 s on a
    # loaded 2-core machine (53.7 s against 43.6 s in one CI run, 98.7 s
    # against 64.7 s beside six other jobs, the cache's own cost under 3 s
    # both times): the bound above is the claim; this one only catches a hang
    # (a timeout of its own, an exit that waits for the hung server).
    assert wall < 2 * base + 3.0, f"stopped server {wall:.2f}s vs no cache {base:.2f}s"


def test_stopped_server_mega_load_fails_fast(start_server: Any, tmp_path: Any) -> None:
    """A launcher's `python -m cachesvc.torch load RUN` (what `cachesvc warm
    --torch` runs) and a script's cachesvc.torch.load() against a hung server
    give up after the first-byte timeout with the server's failure (exit 3, a
    warning) instead of blocking for the whole transfer budget (300 s)."""
    from conftest import clean_env

    srv = start_server()
    env = clean_env({"CACHESVC_URL": srv.url, "CACHESVC_NAMESPACE": "mega-failfast",
                     "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")})
    script = ("import logging; logging.basicConfig()\n"
              "import cachesvc.torch\n"
              "print('loaded', cachesvc.torch.load('sweep-1'))\n")
    sigstop(srv.proc.pid)
    try:
        cli = subprocess.run([sys.executable, "-m", "cachesvc.torch", "load", "sweep-1"], env=env,
                             capture_output=True, text=True, timeout=120)
        lib = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                             timeout=120)
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
    assert cli.returncode == 3, (cli.returncode, cli.stderr)
    assert "first-byte timeout" in cli.stderr, cli.stderr
    assert lib.returncode == 0 and "loaded None" in lib.stdout, lib.stderr
    assert "loading the Mega-Cache of run 'sweep-1' failed" in lib.stderr, lib.stderr
