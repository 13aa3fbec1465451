"""Self-healing with real torch 2.15 (CPU) and a real server: an AOTAutograd
entry whose bytes are checksummed and valid JSON but whose artifact torch
cannot unpickle is reported, quarantined by a second client, and replaced by
that client's compile; afterwards nothing misses.

Compiles are counted with torch._dynamo.utils.counters (torchprog.py).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from cachesvc import Client

AOT = "autograd-experimental"


def mangle(value: bytes) -> bytes:
    """torch's JSON framing kept, the pickled artifact cut in half: the JSON
    decodes, the unpickling fails."""
    doc = json.loads(value)
    raw = base64.b64decode(doc["data"])
    doc["data"] = base64.b64encode(raw[: len(raw) // 2]).decode()
    return json.dumps(doc).encode()


def aot_key(c: Client, run: str) -> str:
    """The server key of one AOTAutograd entry the run wrote (the first by name)."""
    named = []
    for e in c.manifest(run)["keys"]:
        info = c.head(str(e["key"]))
        if info is not None and info.name.startswith(AOT + ":"):
            named.append((info.name, str(e["key"])))
    assert len(named) == 2, named  # one per block
    return sorted(named)[0][1]


def test_unloadable_artifact_is_reported_quarantined_and_healed(start_server: Any, run_torch: Any) -> None:
    server = start_server()
    ns = "heal"
    c = Client(server.url, ns, timeout=30)
    a = run_torch(server.url, ns, "--run", "heal-a")
    assert a.out["aot_autograd"].get("autograd_cache_miss") == 2 and a.out["flushed"] is True, a.out
    key = aot_key(c, "heal-a")
    info = c.head(key)
    good = c.get(key)
    assert good is not None
    bad = mangle(good)
    assert c.delete(key)
    assert c.put(key, bad, backend=info.backend, name=info.name).created

    # A fresh process: the bad artifact is fetched, fails to unpickle, is
    # reported and stays a miss; torch compiles that block's AOTAutograd
    # graphs (its FX graphs still hit) and trains bit-identically.
    b = run_torch(server.url, ns, "--run", "heal-b")
    o = b.out
    assert o["aot_autograd"].get("autograd_cache_miss") == 1 and o["aot_autograd"].get("autograd_cache_hit") == 1, o
    assert o["digests"] == a.out["digests"]
    s = o["stats"]
    assert (s["load_failures"], s["reports"], s["reports_quarantined"]) == (1, 1, 0), s
    assert s["errors"] == 0, s
    assert "failed to load" in b.stderr, b.stderr[-3000:]
    rep = c.reports(key)
    assert (rep["reports"], rep["distinct_reporters"], rep["quarantined"]) == (1, 1, False), rep
    assert "could not load the AOTAutogradCache artifact" in rep["recent"][0]["reason"], rep
    assert c.get(key) == bad

    # A second client reports it: quarantined (its reasons are listed), and
    # that client's own compile then replaces the quarantined entry.
    q = run_torch(server.url, ns, "--run", "heal-c")
    s = q.out["stats"]
    assert (s["load_failures"], s["reports"], s["reports_quarantined"]) == (1, 1, 1), s
    assert q.out["digests"] == a.out["digests"]
    healed = c.get(key)
    assert healed is not None and healed != bad, "the quarantined bytes are still served"
    assert c.quarantined()["entries"] == []

    # Healed: the next process loads everything from the server.
    d = run_torch(server.url, ns, "--run", "heal-d")
    assert d.out["aot_autograd"].get("autograd_cache_hit") == 2, d.out["aot_autograd"]
    assert "autograd_cache_miss" not in d.out["aot_autograd"], d.out["aot_autograd"]
    assert d.out["stats"]["load_failures"] == 0 and d.out["digests"] == a.out["digests"], d.out["stats"]
    log = server.log()
    assert "entry quarantined" in log and key in log


def test_install_wraps_and_uninstall_restores_the_loader() -> None:
    import cachesvc.torch as ct
    from torch._inductor.codecache import GuardedCache

    orig = GuardedCache.__dict__["iterate_over_candidates"]
    svc = ct.install("http://127.0.0.1:9", "heal")
    try:
        assert svc is not None
        assert getattr(GuardedCache.iterate_over_candidates, "__cachesvc__", False)
    finally:
        ct.uninstall()
    assert GuardedCache.__dict__["iterate_over_candidates"] is orig


def test_truncated_cpp_library_is_reported_and_compiled_locally(torch_server: Any, run_torch: Any,
                                                                process_a: Any) -> None:
    """A C++ kernel library served by the ``cpp`` tier that is truncated (its
    bytes were bad when uploaded: the server's digests cannot tell) is not
    written where torch would dlopen it: before, the job died (torch's
    vector-ISA probe failed to load its library, so every kernel failed to
    compile, or a kernel's dlopen raised). Now each is reported, the kernels
    are compiled here, training goes on bit-identically, with one warning."""
    src, ns = Client(torch_server.url, "ab", timeout=30), "healcpp"
    dst = Client(torch_server.url, ns, timeout=30)
    libs = []
    for e in src.manifest("mega-a")["keys"]:  # process A's entries, copied, its libraries cut in half
        key = str(e["key"])
        info, data = src.head(key), src.get(key)
        if info is None or data is None:
            continue
        if info.name.endswith(".so"):
            data = data[: len(data) // 2]
            libs.append(key)
        assert dst.put(key, data, backend=info.backend, name=info.name, compile_seconds=info.compile_seconds).created
    assert len(libs) >= 4, libs
    b = run_torch(torch_server.url, ns, "--run", "healcpp-b")
    o = b.out
    assert o["inductor"].get("fxgraph_cache_hit") == 4, o["inductor"]  # the FX graphs were fine
    assert o["digests"] == process_a.out["digests"]
    s = o["stats"]
    assert s["load_failures"] == s["reports"] == s["by_cache"]["inductor-cpp"]["hits"] >= len(libs), s
    assert s["errors"] == 0, s
    assert o["cxx"]["compiles"] >= 4, o["cxx"]  # built here instead
    assert len(b.warnings()) == 1, b.warnings()
    assert "not a loadable shared library here: truncated" in b.warnings()[0], b.warnings()
    rep = dst.reports(libs[0])
    assert rep is not None and rep["distinct_reporters"] == 1, rep
    assert "is not a loadable shared library here" in rep["recent"][0]["reason"], rep
