"""What a JAX process stopped by SIGTERM loses, against a real server.

Schedulers stop jobs with SIGTERM (Kubernetes pod deletion, SLURM scancel,
torchrun tearing down ranks). Python's default action kills the process at
once, without running ``atexit``, so entries still in the background upload
queue were lost. The process here sends SIGTERM to itself right after a
compile returns: that is the moment the entry is queued and not yet written
(a signal sent by the test would race the uploader thread).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from conftest import PY_DIR, run_py
from test_jax import env_for

PROG = """
import os, signal, sys
import cachesvc.jax, jax, jax.numpy as jnp, numpy as np
if sys.argv[1] == "own":  # the program's own handler: exits through sys.exit (atexit runs)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
cachesvc.jax.install()
x = np.ones((16, 16), np.float32)
jax.jit(lambda a: jnp.sin(a) @ a.T + 1)(x).block_until_ready()
os.kill(os.getpid(), signal.SIGTERM)
signal.pause()  # SIGTERM's handler runs here at the latest
"""

QUICK = """
import json, cachesvc.jax, jax, jax.numpy as jnp, numpy as np
cachesvc.jax.install()
x = np.ones((16, 16), np.float32)
jax.jit(lambda a: jnp.sin(a) @ a.T + 1)(x).block_until_ready()
print(json.dumps(cachesvc.jax.stats()))
"""


@pytest.mark.parametrize("handler, status", [
    ("default", -signal.SIGTERM),  # cachesvc's handler flushes, then dies by SIGTERM as before
    ("own", 143),  # left alone: the program's sys.exit runs the atexit flush
])
def test_entry_compiled_before_sigterm_is_on_the_server(shared_server, tmp_path: Path, handler: str,
                                                        status: int) -> None:
    """A process killed by SIGTERM right after a compile still wrote its
    entry, and still died the way it would have without cachesvc."""
    script = tmp_path / "killed.py"
    script.write_text(PROG)
    env = {**os.environ, "PYTHONPATH": str(PY_DIR), "JAX_PLATFORMS": "cpu",
           **env_for(shared_server, f"killed-{handler}", CACHESVC_NAMESPACE=f"sigterm-{handler}")}
    res = subprocess.run([sys.executable, str(script), handler], env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == status, f"exited {res.returncode}\n{res.stderr[-3000:]}"
    quick = tmp_path / "quick.py"
    quick.write_text(QUICK)
    again, _ = run_py(quick, [], env_for(shared_server, f"after-{handler}", CACHESVC_NAMESPACE=f"sigterm-{handler}"))
    assert again["hits"] == again["lookups"] >= 1 and again["misses"] == 0, \
        f"the entry compiled before SIGTERM is not on the server: {again}"


HOLDER = """
import json, os, signal
import cachesvc.jax, jax, jax.numpy as jnp, numpy as np
from jax._src import compiler
cachesvc.jax.install(leases=True, lease_ttl=300)  # the lease outlives the test unless released
orig = compiler.backend_compile_and_load

def killed_while_compiling(*a, **k):
    print(json.dumps(cachesvc.jax.stats()), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)  # the scheduler stops the job during the XLA compile
    return orig(*a, **k)

compiler.backend_compile_and_load = killed_while_compiling
jax.jit(lambda a: jnp.cos(a) @ a.T + 2)(np.ones((16, 16), np.float32)).block_until_ready()
signal.pause()
"""


def test_lease_of_compile_stopped_by_sigterm_is_released(server, tmp_path: Path) -> None:
    """A process stopped by SIGTERM while it compiles under a lease releases
    the lease: before, other processes waited for its ttl (30 s by default,
    measured 23.5 s for a waiter that came 1 s into the compile) before one
    of them compiled."""
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    env = {**os.environ, "PYTHONPATH": str(PY_DIR), "JAX_PLATFORMS": "cpu",
           **env_for(server, "holder", CACHESVC_NAMESPACE="sigterm-lease")}
    res = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == -signal.SIGTERM, f"exited {res.returncode}\n{res.stderr[-3000:]}"
    assert json.loads(res.stdout.strip().splitlines()[-1])["leases_granted"] == 1, res.stdout
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as r:
        held = [ln for ln in r.read().decode().splitlines() if ln.startswith("cachesvc_leases_held ")]
    assert held == ["cachesvc_leases_held 0"], f"the killed compile's lease is still held: {held}"


RULES = """
import os, signal, sys, threading, time
from cachesvc import _sigterm

case = sys.argv[1]
out = lambda s: (os.write(1, (s + "\\n").encode()))

def flush(timeout):
    out(f"flush in {os.getpid()} within {timeout}")
    if case == "second":
        os.kill(os.getpid(), signal.SIGTERM)  # the scheduler's second SIGTERM, during the flush
    if case in ("second", "stuck"):
        time.sleep(60)  # a server that does not answer
        out("flush finished")

if case == "own":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
if case == "thread":
    t = threading.Thread(target=_sigterm.register, args=("t", flush))
    t.start(); t.join()
else:
    _sigterm.register("t", flush)
def checkpoint_then_exit(*_):  # a program saving a checkpoint on SIGTERM, then exiting
    time.sleep(1)
    sys.exit(143)

if case == "own_after":  # set after install: the watcher must leave it alone too
    signal.signal(signal.SIGTERM, checkpoint_then_exit)
out(f"handler {'cachesvc' if signal.getsignal(signal.SIGTERM) is _sigterm._handler else 'other'}")
if case == "uninstall":
    _sigterm.unregister("t")
    out(f"restored {signal.getsignal(signal.SIGTERM) is signal.SIG_DFL}, wakeup fd {signal.set_wakeup_fd(-1)}")
    sys.exit(0)
if case == "blocked":
    # The main thread stuck in a C call that never returns to Python (a rank
    # waiting in a collective for a dead peer): here the signal goes to
    # another thread, and the main thread's sleep is not interrupted.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(60)
    out("main thread woke")
if case == "fork":
    pid = os.fork()
    if pid == 0:
        os.kill(os.getpid(), signal.SIGTERM)
        signal.pause()
    out(f"child {os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}")
    time.sleep(1)  # time for the child's SIGTERM to reach a watcher it must not reach
    sys.exit(0)
os.kill(os.getpid(), signal.SIGTERM)
signal.pause()
"""


@pytest.mark.parametrize("case, status, lines", [
    # The handler flushes within the bound, then the process dies by SIGTERM.
    ("default", -signal.SIGTERM, ["handler cachesvc", "flush in {pid} within 5.0"]),
    # A second SIGTERM during the flush kills at once (the flush never finishes).
    ("second", -signal.SIGTERM, ["handler cachesvc", "flush in {pid} within 5.0"]),
    # A flush that does not finish is left after the bound (5 s): the process dies by SIGTERM.
    ("stuck", -signal.SIGTERM, ["handler cachesvc", "flush in {pid} within 5.0"]),
    # The program's own handler is left alone, set before install or after it.
    ("own", 143, ["handler other"]),
    ("own_after", 143, ["handler other"]),
    # A main thread blocked in C: the watcher (wakeup fd) flushes and kills.
    ("blocked", -signal.SIGTERM, ["handler cachesvc", "flush in {pid} within 5.0"]),
    # Not the main thread: no handler (signal.signal would raise there).
    ("thread", -signal.SIGTERM, ["handler other"]),
    # uninstall restores the default.
    ("uninstall", 0, ["handler cachesvc", "restored True, wakeup fd -1"]),
    # A forked child does not flush its parent's state; it still dies by SIGTERM.
    ("fork", 0, ["handler cachesvc", f"child {-signal.SIGTERM}"]),
])
def test_sigterm_handler_rules(tmp_path: Path, case: str, status: int, lines: list[str]) -> None:
    """Where cachesvc's SIGTERM handler is set, and what it does, in a real
    process sent real signals."""
    script = tmp_path / "rules.py"
    script.write_text(RULES)
    p = subprocess.Popen([sys.executable, str(script), case], env={**os.environ, "PYTHONPATH": str(PY_DIR)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()  # a flush without the bound: never leave it running
        p.communicate()
        raise
    assert p.returncode == status, f"exited {p.returncode}\n{stderr[-3000:]}"
    assert stdout.splitlines() == [ln.format(pid=p.pid) for ln in lines], stderr[-3000:]
