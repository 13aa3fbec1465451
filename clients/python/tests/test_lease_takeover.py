"""A sweep's arms waiting on a compile lease whose holder dies: one of them
takes the expired lease over and compiles, the others wait for its entry.

Real JAX processes and a real server. The holder names a process on another
host (so no waiter can see that it died) and is SIGKILLed inside XLA's
compile while three waiters are parked on its lease; its lease then expires
after ``lease_ttl``. Before, every waiter compiled the program when the
lease expired (three compiles of one program).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from conftest import PY_DIR

SCRIPT = """
import json, os, pathlib, signal, sys, time
import jax, jax.numpy as jnp, numpy as np
from jax._src import compiler
import cachesvc.jax

role, sync = sys.argv[1], pathlib.Path(sys.argv[2])
backend = cachesvc.jax.install(leases=True, lease_ttl=3, lease_wait=120)
orig, compiles = compiler.backend_compile_and_load, [0]

def compile_or_die(*a, **k):
    if role == "holder":  # holds the lease (renewed) until told to die
        (sync / "compiling").touch()
        while not (sync / "die").exists():
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)
    compiles[0] += 1
    return orig(*a, **k)

if role == "holder":
    backend.leasebook.holder = "another-host:1"  # no waiter can tell it died
compiler.backend_compile_and_load = compile_or_die
x = np.ones((8, 8), np.float32)
jax.jit(lambda a: jnp.sin(a) @ a.T)(x).block_until_ready()
cachesvc.jax.flush(60)
print(json.dumps(dict(cachesvc.jax.stats(), compiles=compiles[0])))
"""


def _waiters(url: str) -> float:
    metrics = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    return sum(float(ln.split()[1]) for ln in metrics.splitlines() if ln.startswith("cachesvc_lease_waiters "))


def test_waiters_take_an_expired_lease_over_and_compile_once(server, tmp_path):
    script = tmp_path / "arm.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(PY_DIR), JAX_PLATFORMS="cpu", CACHESVC_URL=server.url,
               CACHESVC_NAMESPACE="default")

    def start(role: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(script), role, str(tmp_path)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    holder = start("holder")
    waiters: list[subprocess.Popen] = []
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "compiling").exists():
            assert holder.poll() is None and time.monotonic() < deadline, holder.communicate()
            time.sleep(0.05)
        waiters = [start("waiter") for _ in range(3)]
        while _waiters(server.url) < 3:  # all three parked behind the holder's lease
            assert all(w.poll() is None for w in waiters) and time.monotonic() < deadline, [
                w.communicate() for w in waiters if w.poll() is not None]
            time.sleep(0.1)
        (tmp_path / "die").touch()
        assert holder.wait(timeout=60) == -signal.SIGKILL
        reports, errs = [], []
        for w in waiters:
            out, err = w.communicate(timeout=300)
            assert w.returncode == 0, err[-3000:]
            reports.append(json.loads(out.strip().splitlines()[-1]))
            errs.append(err)
    finally:
        for p in [holder, *waiters]:
            if p.poll() is None:
                p.kill()
                p.wait()
    summary = [{k: r[k] for k in ("compiles", "leases_granted", "lease_waits", "lease_wait_hits", "puts", "errors")}
               for r in reports]
    # Before: [1, 1, 1] compiles, every waiter compiling when the lease expired.
    assert sorted(r["compiles"] for r in reports) == [0, 0, 1], summary
    assert sum(r["lease_wait_hits"] for r in reports) == 2 and all(r["errors"] == 0 for r in reports), summary
    said = [e.count("expired without its entry") for e in errs]
    assert sorted(said) == [0, 0, 1], errs  # the one that took it over says so, once
    assert "'another-host:1'" in "".join(errs), errs
