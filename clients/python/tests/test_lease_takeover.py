"""A sweep's arms waiting on a compile lease whose holder dies: one of them
takes the expired lease over and compiles, the others wait for its entry.

Real JAX processes and a real server. The holder names a process on another
host (so no waiter can see that it died) and is SIGKILLed inside XLA's
compile while three waiters are parked on its lease; its lease then expires
after ``lease_ttl``. Before, every waiter compiled the program when the
lease expired (three compiles of one program).
"""

from __future__ import annotations

import inspect
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
ttl = {} if sys.argv[3] == "default" else {"lease_ttl": float(sys.argv[3])}
backend = cachesvc.jax.install(leases=True, lease_wait=300, **ttl)
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


def _sweep(url: str, tmp_path: Path, ttl: str, n: int, hold: float = 0.0) -> tuple[list[dict], list[str], float]:
    """Starts a holder (lease_ttl ``ttl``, or "default") and, once it compiles,
    ``n`` waiters; kills the holder ``hold`` s after all of them are parked
    behind its lease. Returns the waiters' reports, their stderr, and the
    seconds from the kill until the last waiter finished."""
    script = tmp_path / "arm.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(PY_DIR), JAX_PLATFORMS="cpu", CACHESVC_URL=url,
               CACHESVC_NAMESPACE="default")

    def start(role: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(script), role, str(tmp_path), ttl], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    holder = start("holder")
    waiters: list[subprocess.Popen] = []
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "compiling").exists():
            assert holder.poll() is None and time.monotonic() < deadline, holder.communicate()
            time.sleep(0.05)
        waiters = [start("waiter") for _ in range(n)]
        while _waiters(url) < n:  # all parked behind the holder's lease
            assert all(w.poll() is None for w in waiters) and time.monotonic() < deadline, [
                w.communicate() for w in waiters if w.poll() is not None]
            time.sleep(0.1)
        time.sleep(hold)
        # Still parked: the holder's lease outlived its TTL (renewed).
        assert _waiters(url) == n and all(w.poll() is None for w in waiters), "a waiter stopped waiting"
        (tmp_path / "die").touch()
        assert holder.wait(timeout=60) == -signal.SIGKILL
        killed = time.monotonic()
        reports, errs = [], []
        for w in waiters:
            out, err = w.communicate(timeout=400)
            assert w.returncode == 0, err[-3000:]
            reports.append(json.loads(out.strip().splitlines()[-1]))
            errs.append(err)
        return reports, errs, time.monotonic() - killed
    finally:
        for p in [holder, *waiters]:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_waiters_take_an_expired_lease_over_and_compile_once(server, tmp_path):
    reports, errs, _ = _sweep(server.url, tmp_path, "3", 3)
    summary = [{k: r[k] for k in ("compiles", "leases_granted", "lease_waits", "lease_wait_hits", "puts", "errors")}
               for r in reports]
    # Before: [1, 1, 1] compiles, every waiter compiling when the lease expired.
    assert sorted(r["compiles"] for r in reports) == [0, 0, 1], summary
    assert sum(r["lease_wait_hits"] for r in reports) == 2 and all(r["errors"] == 0 for r in reports), summary
    said = [e.count("expired without its entry") for e in errs]
    assert sorted(said) == [0, 0, 1], errs  # the one that took it over says so, once
    assert "'another-host:1'" in "".join(errs), errs


def test_waiters_of_a_killed_holder_stall_about_the_default_lease_ttl(server, tmp_path):
    """With install()'s default lease_ttl, a holder that compiled (renewing
    its lease) for longer than that TTL keeps the lease, and once it is
    killed its waiter goes on within about that TTL (the lease expires a TTL
    after the holder's last renewal, up to TTL/4 before the kill). Before,
    the default was 120 s: the waiter stalled 95 s here, a sweep's arms
    stalling that long behind each killed holder; with 30 s it stalled 23 s
    (30 s with three busy loops on 2 cores)."""
    from cachesvc.jax import install

    ttl = inspect.signature(install).parameters["lease_ttl"].default
    # The holder compiles 1.2 TTLs before it is killed: without renewal its
    # lease would have expired under the waiter, which would have compiled.
    reports, errs, stalled = _sweep(server.url, tmp_path, "default", 1, hold=1.2 * ttl)
    assert [r["compiles"] for r in reports] == [1] and reports[0]["leases_granted"] == 1, reports
    assert errs[0].count("expired without its entry") == 1, errs  # taken over after the kill, not before
    # The waiter learns of the expiry on its next look, within a second
    # of it; the rest is its own compile (a few seconds). Half the old
    # default: a sweep should not stall minutes behind each killed arm.
    assert stalled < 60, f"the waiter stalled {stalled:.0f}s after the holder was killed (lease_ttl {ttl:g})"
