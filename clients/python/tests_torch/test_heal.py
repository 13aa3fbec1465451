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
