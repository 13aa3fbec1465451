"""Two shape classes of one FX graph key across processes, real torch 2.15
(CPU) and a real server (tests_torch/dynprog.py).

torch keys an FX graph and an AOTAutograd entry without the guards on their
symbolic sizes; a remote cache holds one value per key and cachesvc entries
are immutable. A model mean-pooling over a dynamic sequence length compiles
to one key for every length, but its graph for 64 tokens guards ``s <= 4096``
and the one for 5000 tokens ``s > 4096``. Before ``_candidates``, every
process of the second class failed the first class's guards, compiled again
and had its write refused. The three-process test took 57 s and 90 s on 2
cores shared with other compiles (load 12-19); the service-level tests 3 s in
all.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from cachesvc import Client
from cachesvc._failopen import Breaker
from cachesvc.torch import _keys
from cachesvc.torch._candidates import SLOTS, slot_key
from cachesvc.torch._service import Service
from conftest import HERE, clean_env

PROG = HERE / "dynprog.py"


def dyn(url: str, ns: str, length: int, tmp: Path) -> dict[str, Any]:
    """dynprog.py in a fresh interpreter with an empty Inductor cache: only the
    remote tier can hit."""
    d = tmp / f"inductor-{length}-{len(list(tmp.iterdir()))}"
    d.mkdir()
    res = subprocess.run([sys.executable, str(PROG), "--url", url, "--ns", ns, "--len", str(length)],
                         env=clean_env({"TORCHINDUCTOR_CACHE_DIR": str(d)}), capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, f"dynprog exited {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["close"], out
    return out


def fx_lookups(out: dict[str, Any]) -> int:
    """Requests this process sent for FX graphs (hits, misses and rejected hits)."""
    c = out["stats"]["by_cache"].get("fx-graph-v1", {})
    return int(c.get("hits", 0) + c.get("misses", 0) + c.get("guard_misses", 0))


def test_second_shape_class_is_stored_as_a_candidate(torch_server: Any, tmp_path: Path) -> None:
    url, ns = torch_server.url, "shapes"
    a = dyn(url, ns, 64, tmp_path)
    b = dyn(url, ns, 5000, tmp_path)
    c = dyn(url, ns, 5000, tmp_path)

    # C, of B's class: the candidates B stored hold, nothing compiles (before,
    # C failed A's guards and compiled again, as every later process would).
    assert c["inductor"].get("fxgraph_cache_hit") == 1 and "fxgraph_cache_miss" not in c["inductor"], c
    assert c["aot_autograd"].get("autograd_cache_hit") == 1, c
    assert c["digest"] == b["digest"]
    s = c["stats"]
    assert (s["guard_misses"], s["puts"], fx_lookups(c)) == (2, 0, 2), s

    assert a["inductor"] == {"fxgraph_cache_miss": 1}, a
    assert fx_lookups(a) == 1, a["stats"]
    # B: A's graph and AOTAutograd entry failed its guards: it compiled and
    # stored both as the key's second candidates; a rejected value is no hit.
    assert b["inductor"].get("fxgraph_cache_miss") == 1, b
    s = b["stats"]
    assert (s["guard_misses"], s["candidates_written"], s["put_conflicts"]) == (2, 2, 0), s
    assert s["by_cache"]["fx-graph-v1"].get("hits", 0) == 0, s


def _service(url: str, ns: str, leases: bool = False) -> Service:
    svc = Service(Client(url, namespace=ns), timeout=10.0, put_timeout=None, breaker=Breaker(3, 30.0),
                  warn_interval=60.0, components=None, background_uploads=False, upload_queue_bytes=1 << 20,
                  flush_at_exit=10.0, leases=leases, lease_wait=60.0)
    if svc.leasebook is not None:
        svc.leasebook.renew = True  # as install() sets it once _lease's wrapper is in place
    return svc


def _walk(svc: Service, key: str, mine: bytes = b"") -> bytes | None:
    """A process as ``_heal``'s candidate walk drives the service: a candidate
    served other than ``mine`` (its class's) is rejected on its guards.
    Returns the value that stopped the walk (None: a miss)."""
    got = None
    for slot in range(SLOTS):
        with svc.slots.at(slot):
            got = svc.get(key)
        if got is None or got == mine:
            break
        svc.guard_missed(key, slot)
    return got


def _process(url: str, ns: str, key: str, value: bytes) -> dict[str, Any]:
    """:func:`_walk`, then the compiled value written; the process's stats."""
    svc = _service(url, ns)
    _walk(svc, key)
    svc.put(key, value)
    return svc.stats()


def test_candidates_are_bounded_per_key(torch_server: Any) -> None:
    """Classes past SLOTS compile and write nothing more (counted). No torch
    compile: the service with torch's key and values."""
    url, ns, key = torch_server.url, "shapes-bound", "pt2:fx-graph-v1::fshapebound:c1"
    for n in range(SLOTS + 2):
        s = _process(url, ns, key, b'{"data": "class %d", "time_taken_ms": 1000}' % n)
        written = 1 if 0 < n < SLOTS else 0
        assert (s["guard_misses"], s["candidates_written"]) == (min(n, SLOTS), written), (n, s)
        assert s["candidates_full"] == (1 if n >= SLOTS else 0), (n, s)
        assert s["hits"] == 0 and s["compile_seconds_saved"] == 0.0, (n, s)
    c = Client(url, namespace=ns)
    stored = [c.lookup_result(_keys.signature(slot_key(key, i) or "", {})).value for i in range(SLOTS + 1)]
    assert stored[:SLOTS] == [b'{"data": "class %d", "time_taken_ms": 1000}' % i for i in range(SLOTS)]
    assert stored[SLOTS] is None  # never more than SLOTS candidates


def test_first_candidate_hit_costs_one_request(torch_server: Any) -> None:
    url, ns, key = torch_server.url, "shapes-one", "pt2:fx-graph-v1::fshapeone:c1"
    _process(url, ns, key, b'{"data": "first", "time_taken_ms": 1000}')
    svc = _service(url, ns)
    with svc.slots.at(0):
        assert svc.get(key) == b'{"data": "first", "time_taken_ms": 1000}'
    s = svc.stats()  # torch's guards held: it asks for no other candidate
    assert (s["lookups"], s["hits"], s["compile_seconds_saved"]) == (1, 1, 1.0), s


def test_two_processes_of_one_new_class_store_one_candidate(torch_server: Any) -> None:
    url, ns, key = torch_server.url, "shapes-race", "pt2:fx-graph-v1::fshaperace:c1"
    _process(url, ns, key, b'{"data": "class 0", "time_taken_ms": 1000}')
    x, y = _service(url, ns), _service(url, ns)
    assert _walk(x, key) is None and _walk(y, key) is None  # both missed candidate 1
    x.put(key, b'{"data": "class 1 by x", "time_taken_ms": 1000}')
    y.put(key, b'{"data": "class 1 by y", "time_taken_ms": 1001}')
    assert x.stats()["candidates_written"] == 1
    s = y.stats()
    assert (s["candidates_written"], s["put_conflicts"]) == (0, 1), s
    # Candidate 1 is x's; no third candidate was made.
    z = _service(url, ns)
    with z.slots.at(1):
        assert z.get(key) == b'{"data": "class 1 by x", "time_taken_ms": 1000}'
    with z.slots.at(2):
        assert z.get(key) is None


def test_new_class_leases_its_candidate(torch_server: Any) -> None:
    """With compile leases (on by default in a rank of several), the lease is
    taken on the candidate the class misses: a second process of the class
    gets the first one's graph instead of compiling, and never waits on the
    first class's key (it has its entry)."""
    url, ns, key = torch_server.url, "shapes-lease", "pt2:fx-graph-v1::fshapelease:c1"
    _process(url, ns, key, b'{"data": "class 0", "time_taken_ms": 1000}')
    x, y = _service(url, ns, leases=True), _service(url, ns, leases=True)
    assert x.leasebook is not None and y.leasebook is not None
    x.leasebook.holder, y.leasebook.holder = "shapes-x", "shapes-y"  # two processes, as the server sees them
    assert _walk(x, key) is None  # x holds the lease on candidate 1 now
    got: list[bytes | None] = []
    one = b'{"data": "class 1", "time_taken_ms": 1000}'
    t = threading.Thread(target=lambda: got.append(_walk(y, key, one)))
    t.start()  # y waits for candidate 1 (or finds it, if it starts late)
    x.put(key, one)
    x.compile_ended()
    t.join(60)
    assert got == [one], got
    assert x.stats()["leases_granted"] == 1 and x.stats()["candidates_written"] == 1, x.stats()
    s = y.stats()
    assert (s["leases_granted"], s["puts"], s["guard_misses"]) == (0, 0, 1), s
