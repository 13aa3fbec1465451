"""Self-healing entries end to end: real JAX processes, a real server, and an
entry whose bytes pass every integrity check (its SHA-256 is right) but which
JAX cannot load.

Compiles are counted as calls of jax._src.compiler.backend_compile_and_load
(jaxprog.py's ``xla_compiles``), never by the backend_compile_duration event,
which fires on persistent-cache hits too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from cachesvc import Client
from conftest import run_py

PROG = Path(__file__).with_name("jaxprog.py")
NS = "heal"


def env(server, run: str) -> dict[str, str]:
    return {"CACHESVC_URL": server.url, "CACHESVC_NAMESPACE": NS, "CACHESVC_RUN": run}


def mangle(value: bytes) -> bytes:
    """Plausible but unloadable: JAX's own framing (compressed, 4-byte compile
    time, then the serialized executable) around the first half of the
    serialized executable, so decompression succeeds and deserialization
    fails."""
    from jax._src import compilation_cache as cc

    raw = cc.decompress_executable(value)
    head, ser = raw[:4], raw[4:]
    return cc.compress_executable(head + ser[: len(ser) // 2])


def train_step_key(c: Client, run: str) -> str:
    """The server key of the run's jit_train_step entry (from the run's
    manifest, the entries' names via HEAD)."""
    keys = [str(e["key"]) for e in c.manifest(run)["keys"]]
    for k in keys:
        info = c.head(k)
        if info is not None and "train_step" in (info.name or ""):
            return k
    raise AssertionError(f"no train_step entry among {len(keys)} keys of run {run}")


def test_unloadable_entry_is_reported_quarantined_restored_and_healed(start_server):
    server = start_server(extra=["--quarantine-after", "2"])
    c = Client(server.url, NS, timeout=30)

    cold, _ = run_py(PROG, ["mlp", "--sync-uploads"], env(server, "cold"))
    assert cold["xla_compiles"] > 1 and cold["stats"]["puts"] == cold["xla_compiles"], cold
    key = train_step_key(c, "cold")
    good = c.get(key)
    assert good is not None
    info = c.head(key)

    # Replace the entry with bytes JAX cannot load, stored with their own
    # (valid) SHA-256: the admin DELETE then PUT.
    bad = mangle(good)
    assert c.delete(key)
    assert c.put(key, bad, backend=info.backend, name=info.name).created

    # A fresh process: the bad entry is fetched, fails to load, is reported
    # and treated as a miss; JAX compiles exactly that one program again and
    # the results are the cold run's.
    a, a_err = run_py(PROG, ["mlp", "--sync-uploads"], env(server, "a"))
    assert a["xla_compiles"] == 1, a
    assert a["digest"] == cold["digest"] and a["losses"] == cold["losses"]
    st = a["stats"]
    assert (st["load_failures"], st["reports"], st["reports_quarantined"]) == (1, 1, 0), st
    assert st["hits"] == cold["xla_compiles"] and st["errors"] == 0, st
    assert st["put_conflicts"] == 1, st  # its recompile met the live bad entry: first writer wins
    assert "failed to load" in a_err and "reporting it" in a_err
    rep = c.reports(key)
    assert (rep["reports"], rep["distinct_reporters"], rep["threshold"], rep["quarantined"]) == (1, 1, 2, False), rep
    assert "JAX could not load the executable" in rep["recent"][0]["reason"], rep
    assert c.get(key) == bad  # one client's word is not enough

    # A second, distinct client (a process that writes nothing, like process
    # 1 of a multi-host job) reports it too: quarantined.
    b, _ = run_py(PROG, ["mlp", "--no-write"], env(server, "b"))
    assert b["xla_compiles"] == 1 and b["digest"] == cold["digest"], b
    st = b["stats"]
    assert (st["load_failures"], st["reports"], st["reports_quarantined"]) == (1, 1, 1), st
    assert c.get(key) is None and c.head(key) is None  # never served: a miss
    listed = c.quarantined()["entries"]
    assert [e["key"] for e in listed] == [key], listed
    q = listed[0]
    assert (q["cause"], q["reports"], q["restorable"], q["name"]) == ("reports", 2, True, info.name), q
    assert q["sha256"] == _sha(bad)
    # The same bytes again do not resurrect it.
    with pytest.raises(Exception) as exc:
        c.put(key, bad, backend=info.backend, name=info.name)
    assert getattr(exc.value, "code", "") == "quarantined", exc.value

    # An admin restores it (served again, reports cleared), then
    # quarantines it by hand.
    assert c.restore(key)
    assert c.get(key) == bad
    assert c.reports(key)["reports"] == 0
    assert c.quarantine(key, "bad bytes, confirmed by hand")
    assert c.get(key) is None

    # Healing: the next writer misses, compiles and its different bytes
    # replace the quarantined entry; after it nobody compiles.
    w, _ = run_py(PROG, ["mlp", "--sync-uploads"], env(server, "w"))
    assert w["xla_compiles"] == 1 and w["stats"]["load_failures"] == 0, w
    assert w["stats"]["put_created"] == 1, w["stats"]
    assert c.quarantined()["entries"] == []
    healed = c.get(key)
    assert healed is not None and healed != bad
    warm, _ = run_py(PROG, ["mlp"], env(server, "warm"))
    assert warm["xla_compiles"] == 0 and warm["digest"] == cold["digest"], warm

    metrics = Client(server.url, timeout=10)._request("GET", "/metrics").read_all().decode()
    assert re.search(r'^cachesvc_entry_reports_total\{result="recorded"\} 1$', metrics, re.M), metrics
    assert re.search(r'^cachesvc_entry_reports_total\{result="quarantined"\} 1$', metrics, re.M)
    assert re.search(r'^cachesvc_quarantines_total\{cause="reports"\} 1$', metrics, re.M)
    assert re.search(r'^cachesvc_quarantines_total\{cause="admin"\} 1$', metrics, re.M)
    assert re.search(r'^cachesvc_quarantined_entries 0$', metrics, re.M)
    log = server.log()
    assert re.search(r"entry quarantined.*namespace=heal key=" + key, log), log[-3000:]


def test_report_failure_never_reaches_jax(start_server):
    """A report that fails leaves the load failure a miss: JAX compiles, the
    results are right and nothing raises."""
    server = start_server()
    c = Client(server.url, NS, timeout=30)
    cold, _ = run_py(PROG, ["mlp", "--sync-uploads"], env(server, "cold"))
    key = train_step_key(c, "cold")
    info = c.head(key)
    bad = mangle(c.get(key))
    assert c.delete(key)
    assert c.put(key, bad, backend=info.backend, name=info.name).created
    # The report goes to a port where nothing listens (jaxprog
    # --dead-reports): a real connection failure, after a real load failure.
    r, err = run_py(PROG, ["mlp", "--no-write", "--dead-reports"], env(server, "r"))
    assert r["xla_compiles"] == 1 and r["digest"] == cold["digest"], r
    st = r["stats"]
    assert (st["load_failures"], st["reports"], st["errors"]) == (1, 0, 0), st
    assert "report of" in err, err[-2000:]
    assert c.reports(key)["reports"] == 0


def _sha(b: bytes) -> str:
    import hashlib

    return hashlib.sha256(b).hexdigest()


if os.environ.get("CACHESVC_SKIP_JAX"):
    pytest.skip("JAX tests disabled", allow_module_level=True)
