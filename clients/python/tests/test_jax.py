"""cachesvc.jax with real JAX on CPU, in separate processes, against a real server.

Compile counting (see jaxprog.py): in jax 0.10.2 the duration event
/jax/core/compile/backend_compile_duration also fires on persistent-cache hits,
so "real XLA compiles" = backend_compile events - cache_hits events; the
program also counts compiler.backend_compile_and_load calls directly, and the
tests assert both are zero on the warm run.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import PY_DIR, run_py

PROG = Path(__file__).with_name("jaxprog.py")
EIGHT = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}


def env_for(server, run: str, **extra: str) -> dict[str, str]:
    """Environment of one JAX process; the namespace defaults to the test's own."""
    ns = os.environ.get("PYTEST_CURRENT_TEST", "t").split("::")[-1].split(" ")[0]
    ns = "".join(ch if ch.isalnum() else "-" for ch in ns.lower()).strip("-")[:60] or "default"
    e = {"CACHESVC_URL": server.url, "CACHESVC_NAMESPACE": ns, "CACHESVC_RUN": run}
    e.update(extra)
    return e


@pytest.mark.parametrize("mode", ["canonical", "jax-key"])
def test_second_process_compiles_nothing(shared_server, mode):
    cold, _ = run_py(PROG, ["mlp", "--mode", mode], env_for(shared_server, "cold"))
    assert cold["real_compiles"] > 0 and cold["xla_compiles"] == cold["real_compiles"]
    st = cold["stats"]
    assert st["errors"] == 0 and st["put_errors"] == 0, st
    assert st["puts"] == cold["xla_compiles"], st  # every compile was written
    assert st["canonical_fallbacks"] == 0 or mode == "jax-key", st

    warm, _ = run_py(PROG, ["mlp", "--mode", mode], env_for(shared_server, "warm"))
    assert warm["real_compiles"] == 0, warm
    assert warm["xla_compiles"] == 0, warm
    assert warm["cache_hits"] == warm["backend_compile_events"] == cold["backend_compile_events"]
    assert warm["stats"]["hits"] == warm["cache_hits"] and warm["stats"]["puts"] == 0
    assert warm["digest"] == cold["digest"] and warm["losses"] == cold["losses"]


def test_canonical_mode_shares_one_entry(shared_server):
    """f, a renamed copy g and an equivalent lambda share one entry; another
    dtype or shape misses. JAX's own key (jax-key mode) cannot do that."""
    r, _ = run_py(PROG, ["canonical", "--mode", "canonical", "--sync-uploads"], env_for(shared_server, "canon"))
    assert r["compiles_per_call"] == {"f": 1, "g": 0, "lambda": 0, "f_float16": 1, "f_shape": 1}, r
    assert r["same_result"]
    assert r["stats"]["puts"] == 3 and r["stats"]["hits"] == 2, r["stats"]

    # A second process hits every one of them.
    r2, _ = run_py(PROG, ["canonical", "--mode", "canonical"], env_for(shared_server, "canon2"))
    assert r2["real_compiles"] == 0 and r2["digest"] == r["digest"]

    # jax-key mode on a fresh namespace keys by function name: g and the lambda compile.
    r3, _ = run_py(PROG, ["canonical", "--mode", "jax-key"], env_for(shared_server, "jk", CACHESVC_NAMESPACE="canonical-test-jaxkey"))
    assert r3["compiles_per_call"] == {"f": 1, "g": 1, "lambda": 1, "f_float16": 1, "f_shape": 1}, r3
    assert r3["digest"] == r["digest"]


def test_sharded_eight_devices_hit_across_processes(shared_server):
    cold, _ = run_py(PROG, ["sharded"], env_for(shared_server, "s1", **EIGHT))
    assert cold["real_compiles"] > 0 and cold["stats"]["puts"] == cold["real_compiles"]
    assert cold["shardings"] == "P(None, 'model')"
    warm, _ = run_py(PROG, ["sharded"], env_for(shared_server, "s2", **EIGHT))
    assert warm["real_compiles"] == 0 and warm["xla_compiles"] == 0, warm
    assert warm["stats"]["hits"] == cold["backend_compile_events"]
    assert warm["digest"] == cold["digest"] and warm["losses"] == cold["losses"]


def test_server_killed_mid_run(server, tmp_path):
    """Training finishes with one warning and the same results as without a cache."""
    ref, _ = run_py(PROG, ["outage", "--no-cache"],
                    {"CACHESVC_TEST_READY_FILE": str(tmp_path / "r0"), "CACHESVC_TEST_GO_FILE": str(tmp_path / "r0")})
    ready, go = tmp_path / "ready", tmp_path / "go"
    env = dict(os.environ)
    env.update(env_for(server, "outage"))
    env.update({"PYTHONPATH": str(PY_DIR), "JAX_PLATFORMS": "cpu",
                "CACHESVC_TEST_READY_FILE": str(ready), "CACHESVC_TEST_GO_FILE": str(go)})
    p = subprocess.Popen([sys.executable, str(PROG), "outage", "--timeout", "5"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not ready.exists():
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "phase 1 never finished"
            time.sleep(0.05)
        server.kill()
        go.write_text("go")
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    rep = json.loads(out.strip().splitlines()[-1])
    assert rep["digest"] == ref["digest"] and rep["losses"] == ref["losses"]
    st = rep["stats"]
    assert st["puts"] >= 1, st  # phase 1 wrote
    assert st["errors"] + st["put_errors"] >= 1, st
    warnings = [line for line in err.splitlines() if "cachesvc:" in line and "failed" in line]
    assert len(warnings) == 1, err  # rate-limited: one warning


def test_silent_server_is_a_miss_within_budget(tmp_path):
    """A server that accepts connections and never answers: every call ends at
    its budget, the breaker opens, and the program still completes correctly."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        ls.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(ls.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        ref, _ = run_py(PROG, ["canonical", "--no-cache"])
        t0 = time.monotonic()
        r, err = run_py(PROG, ["canonical", "--timeout", "0.5"],
                        {"CACHESVC_URL": f"http://127.0.0.1:{ls.getsockname()[1]}"})
        elapsed = time.monotonic() - t0
    finally:
        stop.set()
        t.join()
        for s in held:
            s.close()
        ls.close()
    assert r["digest"] == ref["digest"]
    st = r["stats"]
    assert st["skipped"] >= 1 and st["hits"] == 0, st  # the breaker opened
    assert "cachesvc:" in err
    assert elapsed < 120  # generous: three 0.5 s budgets, then the breaker


def test_install_without_url_or_hooks_does_nothing(monkeypatch, caplog):
    import cachesvc.jax as cj
    from jax._src import cache_key as ck
    from jax._src import compilation_cache as cc

    monkeypatch.delenv("CACHESVC_URL", raising=False)
    with caplog.at_level(logging.WARNING, logger="cachesvc.jax"):
        assert cj.install() is None
    assert "no server URL" in caplog.text

    orig_get = ck.get
    monkeypatch.delattr(cc, "reset_cache")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="cachesvc.jax"):
        assert cj.install("http://127.0.0.1:9") is None
    assert "lacks compilation_cache.reset_cache" in caplog.text
    assert ck.get is orig_get and cj.installed() is None


def test_install_and_uninstall_restore_jax(monkeypatch):
    import jax
    import cachesvc.jax as cj
    from jax._src import cache_key as ck
    from jax._src import compilation_cache as cc

    from jax._src import compiler

    orig_get = ck.get
    orig_load = cc.get_executable_and_time
    orig_compile = compiler._compile_and_write_cache
    b = cj.install("http://127.0.0.1:9", mode="canonical")
    try:
        assert cc._cache is b and cj.installed() is b
        assert getattr(ck.get, "__wrapped__", None) is orig_get
        assert getattr(cc.get_executable_and_time, "__wrapped__", None) is orig_load  # self-healing hook
        assert getattr(compiler._compile_and_write_cache, "__wrapped__", None) is orig_compile  # lease hook
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0
        with pytest.raises(ValueError):
            cj.install("http://127.0.0.1:9", mode="nope")
    finally:
        cj.uninstall()
    assert ck.get is orig_get and cc._cache is None and cj.installed() is None
    assert cc.get_executable_and_time is orig_load and compiler._compile_and_write_cache is orig_compile


def test_four_processes_with_leases_compile_once(shared_server):
    """Four processes started together on an empty cache, with leases: each
    program is compiled once in total (summed over the processes)."""
    base = dict(os.environ, PYTHONPATH=str(PY_DIR), JAX_PLATFORMS="cpu")
    procs = [subprocess.Popen([sys.executable, str(PROG), "mlp", "--leases"],
                              env=dict(base, **env_for(shared_server, f"lease{i}")),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    programs = reports[0]["backend_compile_events"]
    assert all(r["backend_compile_events"] == programs for r in reports)
    assert sum(r["real_compiles"] for r in reports) == programs, [
        (r["real_compiles"], r["stats"]) for r in reports]
    assert sum(r["stats"]["leases_granted"] for r in reports) == programs
    assert len({r["digest"] for r in reports}) == 1


def test_prefetch_serves_hits_from_memory(shared_server):
    """jax-key mode: a run's manifest warms the process; every hit is served
    from the prefetched view (the passthrough key is computed locally)."""
    cold, _ = run_py(PROG, ["mlp", "--mode", "jax-key"], env_for(shared_server, "pf-cold"))
    warm, _ = run_py(PROG, ["mlp", "--mode", "jax-key", "--prefetch", "pf-cold"], env_for(shared_server, "pf-warm"))
    assert warm["prefetched"] == cold["stats"]["puts"]
    assert warm["real_compiles"] == 0 and warm["digest"] == cold["digest"]
    assert warm["stats"]["prefetch_hits"] == warm["stats"]["hits"] == warm["cache_hits"]
    assert warm["local_passthrough_keys"]  # no request at all for those hits


def test_local_dir_tier_serves_while_server_down(shared_server, tmp_path):
    """With local_dir, a second process on the same host hits the local tier
    even when the server is unreachable; remote hits fill an empty local dir."""
    d1, d2 = tmp_path / "local1", tmp_path / "local2"
    cold, _ = run_py(PROG, ["canonical", "--local-dir", str(d1)], env_for(shared_server, "ld1"))
    assert cold["stats"]["puts"] == 3 and any(p.name.endswith("-cache") for p in d1.iterdir())
    from conftest import free_port
    dead = {"CACHESVC_URL": f"http://127.0.0.1:{free_port()}"}
    offline, err = run_py(PROG, ["canonical", "--local-dir", str(d1)], dead)
    # g and the lambda were remote hits in the first process: written locally too.
    assert offline["real_compiles"] == 0, offline
    assert offline["stats"]["local_hits"] == 5 and offline["digest"] == cold["digest"]
    # A fresh local dir is filled from the server's hits.
    warm, _ = run_py(PROG, ["canonical", "--local-dir", str(d2)], env_for(shared_server, "ld2"))
    assert warm["real_compiles"] == 0 and warm["stats"]["local_hits"] == 0
    assert len([p for p in d2.iterdir() if p.name.endswith("-cache")]) == 5


def test_uploads_queued_at_exit_are_written(shared_server, tmp_path):
    """A process that exits right after compiling still writes its entries:
    background uploads are flushed at exit."""
    script = tmp_path / "quick.py"
    script.write_text(
        "import json, cachesvc.jax, jax, jax.numpy as jnp, numpy as np\n"
        "cachesvc.jax.install()\n"
        "x = np.ones((16, 16), np.float32)\n"
        "print(jax.jit(lambda a: jnp.sin(a) @ a.T)(x).sum())\n"
        "print(json.dumps(cachesvc.jax.stats()))\n")
    first, _ = run_py(script, [], env_for(shared_server, "quick1"))
    programs = first["misses"]
    assert programs >= 1 and first["errors"] == 0, first  # (its puts may still be queued here)
    again, _ = run_py(script, [], env_for(shared_server, "quick2"))
    assert again["hits"] == programs and again["misses"] == 0, again


@pytest.mark.parametrize("mode,hits", [("canonical", True), ("jax-key", False)])
def test_cache_dir_path_not_in_canonical_key(shared_server, tmp_path, mode, hits):
    """JAX 0.10.2 puts jax_compilation_cache_dir's path into the compile
    options (XLA's autotune cache dir), so JAX's own key differs between hosts
    with different cache paths; canonical mode clears those paths."""
    ns = {"CACHESVC_NAMESPACE": f"cachedir-{mode}"}
    a, _ = run_py(PROG, ["canonical", "--mode", mode],
                  env_for(shared_server, "cd1", JAX_COMPILATION_CACHE_DIR=str(tmp_path / "a"), **ns))
    b, _ = run_py(PROG, ["canonical", "--mode", mode],
                  env_for(shared_server, "cd2", JAX_COMPILATION_CACHE_DIR=str(tmp_path / "b"), **ns))
    assert a["digest"] == b["digest"]
    if hits:
        assert b["real_compiles"] == 0 and b["stats"]["local_hits"] == 0, b  # from the server
    else:
        assert b["real_compiles"] == a["real_compiles"], b  # JAX's key changed with the path
