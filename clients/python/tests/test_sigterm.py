"""What a JAX process stopped by SIGTERM loses, against a real server.

Schedulers stop jobs with SIGTERM (Kubernetes pod deletion, SLURM scancel,
torchrun tearing down ranks). Python's default action kills the process at
once, without running ``atexit``, so entries still in the background upload
queue were lost. The process here sends SIGTERM to itself right after a
compile returns: that is the moment the entry is queued and not yet written
(a signal sent by the test would race the uploader thread).
"""

from __future__ import annotations

import signal
import subprocess
import sys
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
    env = {**__import__("os").environ, "PYTHONPATH": str(PY_DIR), "JAX_PLATFORMS": "cpu",
           **env_for(shared_server, f"killed-{handler}", CACHESVC_NAMESPACE=f"sigterm-{handler}")}
    res = subprocess.run([sys.executable, str(script), handler], env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == status, f"exited {res.returncode}\n{res.stderr[-3000:]}"
    quick = tmp_path / "quick.py"
    quick.write_text(QUICK)
    again, _ = run_py(quick, [], env_for(shared_server, f"after-{handler}", CACHESVC_NAMESPACE=f"sigterm-{handler}"))
    assert again["hits"] == again["lookups"] >= 1 and again["misses"] == 0, \
        f"the entry compiled before SIGTERM is not on the server: {again}"
