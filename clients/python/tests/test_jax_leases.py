"""cachesvc.jax under compile leases when the holder does not write the
entry, with real JAX processes and a real server: a holder killed while
compiling (SIGKILL: no release, its lease lasts its TTL), and a holder that
compiled a program JAX never writes (host callbacks).

The killed holder kills itself inside XLA's compile, after its lookup missed
and took the lease and before anything was written: exactly a training
process killed mid-compile. A restarted process on the same host must not
stall behind the dead process's lease; one on another host waits
``lease_wait`` and then says what happened.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import PY_DIR, run_py

SCRIPT = """
import json, os, signal, sys
import jax, jax.numpy as jnp, numpy as np
from jax._src import compiler
import cachesvc.jax

role, lease_wait = sys.argv[1], float(sys.argv[2])
backend = cachesvc.jax.install(leases=True, lease_wait=lease_wait)
if role == "remote":
    backend.leasebook.holder = "another-host:1"  # the lease names a process elsewhere
orig, compiles = compiler.backend_compile_and_load, [0]

def compile_or_die(*a, **k):
    if role != "restart":  # killed while compiling, holding the compile lease
        os.kill(os.getpid(), signal.SIGKILL)
    compiles[0] += 1
    return orig(*a, **k)

compiler.backend_compile_and_load = compile_or_die
x = np.ones((8, 8), np.float32)
jax.jit(lambda a: jnp.sin(a) @ a.T)(x).block_until_ready()
cachesvc.jax.flush(60)
print(json.dumps(dict(cachesvc.jax.stats(), compiles=compiles[0])))
"""


def _env(server, ns: str) -> dict[str, str]:
    return {"CACHESVC_URL": server.url, "CACHESVC_NAMESPACE": ns}


def _killed_holder(script: Path, server, ns: str, role: str) -> None:
    """Runs the script as a holder that is killed in its first compile."""
    env = dict(os.environ, PYTHONPATH=str(PY_DIR), JAX_PLATFORMS="cpu", **_env(server, ns))
    res = subprocess.run([sys.executable, str(script), role, "60"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == -9, (res.returncode, res.stderr[-3000:])


def test_restart_after_holder_killed_compiles_at_once(shared_server, tmp_path):
    """The restarted process finds the lease held by a process of this host
    that no longer runs: it compiles without waiting, and says so once."""
    script = tmp_path / "leased.py"
    script.write_text(SCRIPT)
    _killed_holder(script, shared_server, "lease-killed-local", "local")
    r, err = run_py(script, ["restart", "60"], _env(shared_server, "lease-killed-local"))
    assert r["lease_waits"] == 0, (r, err)  # before: 60 s spent waiting for the dead holder
    assert r["compiles"] >= 1 and r["puts"] == r["compiles"] and r["errors"] == 0, r
    assert err.count("a process on this host that no longer runs") == 1, err
    assert f"{os.uname().nodename}:" in err, err  # names the dead holder


def test_wait_that_runs_out_says_who_holds_the_lease(shared_server, tmp_path):
    """A holder on another host cannot be checked: the process waits
    lease_wait, then compiles and says why it waited and for whom."""
    script = tmp_path / "leased.py"
    script.write_text(SCRIPT)
    _killed_holder(script, shared_server, "lease-killed-remote", "remote")
    r, err = run_py(script, ["restart", "1"], _env(shared_server, "lease-killed-remote"))
    assert r["lease_waits"] == 1 and r["lease_wait_hits"] == 0, (r, err)
    assert r["compiles"] >= 1 and r["errors"] == 0, r
    assert "waited 1s (lease_wait) for another process to compile" in err, err
    assert '"another-host:1"' in err, err  # the server's message names the holder


CALLBACK_SCRIPT = """
import json, pathlib, sys, time
import jax, jax.numpy as jnp
import cachesvc.jax

role, sync = sys.argv[1], pathlib.Path(sys.argv[2])
cachesvc.jax.install(leases=True, lease_wait=20)

def step(x):
    jax.debug.print("sum {}", x.sum())  # host callback: JAX never writes this program
    return jnp.sin(x) * 3

jax.jit(step)(jnp.ones(4)).block_until_ready()
if role == "first":  # keep running (a long training job) while the second one compiles
    cachesvc.jax.flush(60)  # the programs it did write are on the server: no lease left but that one
    (sync / "ready").touch()
    deadline = time.monotonic() + 300
    while not (sync / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
cachesvc.jax.flush(60)
print(json.dumps(cachesvc.jax.stats()))
"""


def test_program_jax_never_writes_releases_its_lease(shared_server, tmp_path):
    """A program with jax.debug.print is compiled under a lease but never
    written: the lease is released as soon as the compile ends, so a second
    process compiles at once instead of waiting lease_wait while the first
    one trains on."""
    script = tmp_path / "callback.py"
    script.write_text(CALLBACK_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(PY_DIR), JAX_PLATFORMS="cpu",
               **_env(shared_server, "lease-callback"))
    first = subprocess.Popen([sys.executable, str(script), "first", str(tmp_path)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not (tmp_path / "ready").exists():
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        second, err = run_py(script, ["second", str(tmp_path)], _env(shared_server, "lease-callback"))
    finally:
        (tmp_path / "go").touch()
        out, ferr = first.communicate(timeout=300)
    assert first.returncode == 0, ferr
    held = json.loads(out.strip().splitlines()[-1])
    assert held["leases_granted"] >= 1 and held["puts"] < held["leases_granted"], held
    # Before: the second process waited for the first one's lease (lease_waits 1,
    # 20 s), and the first one held it until it exited.
    assert second["lease_waits"] == 0 and second["errors"] == 0, (second, err)
    assert second["leases_granted"] >= 1, second


LONG_SCRIPT = """
import json, sys
import jax, jax.numpy as jnp
from jax._src import compiler
import cachesvc.jax

# The compile below takes ~6 s on 2 quiet cores, twice the TTL. A TTL of 3 s
# (renewed every 1 s) leaves 2 s of slack: with lease_ttl=1 (0.5 s of slack)
# a renewal delayed on a loaded machine let the lease expire and each waiter
# compiled too (6 compiles, 4 entries, in CI at load average 20).
cachesvc.jax.install(leases=True, lease_ttl=3)
orig, compiles = compiler.backend_compile_and_load, [0]

def counting(*a, **k):
    compiles[0] += 1
    return orig(*a, **k)

compiler.backend_compile_and_load = counting

def deep(w, x):
    for _ in range(1000):
        x = jnp.tanh(x @ w)
    return (x ** 2).mean()

w, x = jnp.full((32, 32), 0.01), jnp.ones((4, 32))
jax.jit(jax.value_and_grad(deep))(w, x)[0].block_until_ready()
cachesvc.jax.flush(60)
print(json.dumps(dict(cachesvc.jax.stats(), compiles=compiles[0])))
"""


def test_compile_longer_than_lease_ttl_keeps_its_lease(shared_server, tmp_path):
    """Three processes start together on a program whose compile takes longer
    than lease_ttl: the holder renews its lease while compiling, so the
    program is compiled once in all (before, the lease expired mid-compile
    and every waiter compiled it too)."""
    script = tmp_path / "long.py"
    script.write_text(LONG_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(PY_DIR), JAX_PLATFORMS="cpu", **_env(shared_server, "lease-long"))
    procs = [subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    # Each program compiled exactly once in all: every compile was written
    # and created its entry, none was a second copy of an entry.
    compiles = sum(r["compiles"] for r in reports)
    created = sum(r["put_created"] for r in reports)
    assert compiles >= 1 and compiles == created == sum(r["puts"] for r in reports), [
        {k: r[k] for k in ("compiles", "puts", "put_created", "leases_granted", "lease_waits", "lease_wait_hits")}
        for r in reports]


def test_holder_exited_only_for_this_pid_namespace():
    """A holder id names its PID namespace: a process that exited in ours is
    dead; the same pid in another namespace (a container sharing the host
    name) or an id without a namespace cannot be judged, so the lease is
    waited for."""
    from cachesvc._leases import holder_exited, process_holder

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    me = process_holder()
    host_pid, _, ns = me.partition("@")
    assert ns, me  # Linux: the namespace is part of the id
    dead = f"{host_pid.rpartition(':')[0]}:{gone.pid}"
    assert holder_exited(f"{dead}@{ns}")
    assert not holder_exited(f"{dead}@{int(ns) + 1}")  # another container's process
    assert not holder_exited(dead)  # no namespace: cannot tell
    assert not holder_exited(me)  # this process
    assert not holder_exited(f"another-host:{gone.pid}@{ns}")


PROBE_SCRIPT = """
import json, os, time, urllib.request
import jax, jax.numpy as jnp
import cachesvc.jax

cachesvc.jax.install(leases=True, lease_ttl=1)
jax.jit(lambda a: jnp.sin(a).sum())(jnp.ones(8)).block_until_ready()
jax.jit(lambda a: jnp.cos(a).sum())(jnp.ones(8)).block_until_ready()
cachesvc.jax.flush(60)
time.sleep(3)  # three lease TTLs: a lease held now is being renewed
metrics = urllib.request.urlopen(os.environ["CACHESVC_URL"] + "/metrics").read().decode()
held = [float(ln.split()[1]) for ln in metrics.splitlines() if ln.startswith("cachesvc_leases_held ")]
print(json.dumps(dict(cachesvc.jax.stats(), held=held[0])))
"""


def test_leases_of_keys_jax_only_probed_end_with_the_compile(server, tmp_path):
    """With jax_compilation_cache_expect_pgle JAX first probes a PGLE key it
    then does not compile: the lease that probe took ends with the compile,
    like the compiled key's, instead of being renewed while the process
    runs (waiters on that key would wait lease_wait every time)."""
    script = tmp_path / "probe.py"
    script.write_text(PROBE_SCRIPT)
    # Its own server: the gauge counts every namespace's leases.
    r, err = run_py(script, [], dict(_env(server, "lease-probe"), JAX_COMPILATION_CACHE_EXPECT_PGLE="1"))
    assert r["leases_granted"] > r["puts"] >= 2, r  # probes took leases too
    assert r["held"] == 0, (r, err)
