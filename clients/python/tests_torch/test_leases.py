"""Compile leases in cachesvc.torch (``install(leases=True)``): processes that
start together compile each FX graph once, and a compile that writes nothing
keeps no one waiting. Real torch, real server; compiles counted with
torch._dynamo.utils.counters."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from conftest import finish

from cachesvc import Client
from cachesvc._failopen import Breaker
from cachesvc.torch._service import Service

FX = "fx-graph-v1"


def _together(url: str, ns: str, run_torch: Any, barrier: Path, n: int, *args: str,
              timeout: float = 300) -> list[Any]:
    """Runs n training processes that install, then start training at the
    same moment (torchprog --barrier); returns their finished Procs."""
    barrier.mkdir()
    ps = [run_torch(url, ns, *args, "--barrier", str(barrier), wait=False) for _ in range(n)]
    deadline = time.monotonic() + 240
    while len(list(barrier.glob("ready-*"))) < n:
        for p in ps:
            assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, "the training processes never got ready"
        time.sleep(0.05)
    (barrier / "go").touch()
    out = []
    for p in ps:
        stdout, stderr = p.communicate(timeout=timeout)
        out.append(finish(p.returncode, stdout, stderr, p.cache_dir))
    return out


def test_processes_starting_together_compile_each_graph_once(torch_server: Any, run_torch: Any,
                                                               tmp_path: Path) -> None:
    # A waiter waits as long as the process may run: on 2 busy cores one
    # graph's compile can take longer than the default lease_wait (60 s).
    a, b = _together(torch_server.url, "lease2", run_torch, tmp_path / "barrier", 2, "--leases",
                     "--lease-wait", "280")
    _compiled_once(torch_server.url, a, b)


def test_graph_compiles_longer_than_the_lease_ttl_keep_their_lease(torch_server: Any, run_torch: Any,
                                                                    tmp_path: Path) -> None:
    """Each FX graph's compile lasting 1.25 lease TTLs: the holder renews
    its lease while compiling, so each graph is still compiled once (a
    lease that expired mid-compile would let the waiter take it over and
    compile the graph too). An 8 s TTL, not install()'s default 30 s: the
    renewal is the same at every TTL (every TTL/4), and 4 graphs of 1.25
    default TTLs each took 3 minutes of CI."""
    ttl = 8.0
    a, b = _together(torch_server.url, "leaselong", run_torch, tmp_path / "barrier", 2, "--leases",
                     "--lease-wait", "600", "--lease-ttl", str(ttl), "--compile-sleep", str(1.25 * ttl),
                     timeout=600)
    _compiled_once(torch_server.url, a, b)


def _compiled_once(url: str, a: Any, b: Any) -> None:
    """Asserts that two processes started together compiled the test
    model's 4 FX graphs once in all and trained on the same graphs."""
    ind = [p.out["inductor"] for p in (a, b)]
    st = [p.out["stats"] for p in (a, b)]
    # 4 FX graphs (2 blocks x forward, backward): each compiled by one process;
    # without leases both miss every graph and both compile it (8).
    assert sum(i.get("fxgraph_cache_miss", 0) for i in ind) == 4, (ind, st)
    assert sum(i.get("fxgraph_cache_hit", 0) for i in ind) == 4, (ind, st)
    assert sum(s["leases_granted"] for s in st) == 4, st
    # Every wait ended with the holder's entry, never by running out.
    assert sum(s["lease_wait_hits"] for s in st) == sum(s["lease_waits"] for s in st), st
    assert all(s["errors"] == 0 and s["put_errors"] == 0 for s in st), st
    assert a.out["digests"] == b.out["digests"]  # the waiter trains on the holder's graphs, bit-identical
    assert a.warnings() == [] and b.warnings() == [], (a.stderr[-2000:], b.stderr[-2000:])
    # The server counts what the processes count: a waiter's miss followed by
    # its ?wait= hit is no compile (misses - wait_hits), per run.
    runs = {r["run"]: r for r in json.load(urllib.request.urlopen(f"{url}/v1/stats"))["runs"]}
    server = [runs[s["run"]] for s in st]
    assert sum(r["misses"] - r["wait_hits"] for r in server) == sum(s["misses"] for s in st), (server, st)
    assert sum(r["wait_hits"] for r in server) >= sum(s["lease_wait_hits"] for s in st), (server, st)


def _service(url: str, ns: str) -> Service:
    svc = Service(Client(url, namespace=ns), timeout=10.0, put_timeout=None, breaker=Breaker(3, 30.0),
                  warn_interval=60.0, components=None, background_uploads=True, upload_queue_bytes=1 << 20,
                  flush_at_exit=10.0, leases=True, lease_ttl=60.0, lease_wait=30.0)
    assert svc.leasebook is not None
    svc.leasebook.renew = True  # as install does once its compile wrapper is in place
    return svc


def test_compile_that_writes_nothing_releases_its_lease(torch_server: Any) -> None:
    svc = _service(torch_server.url, "leasenone")
    key = f"pt2:{FX}::fnone0123456789abcdef:c1"
    assert svc.get(key) is None  # a miss: the lease is ours, torch would compile
    assert svc.stats()["leases_granted"] == 1
    skey = svc.misses()[-1]["key"]
    other = Client(torch_server.url, namespace="leasenone").lease(skey, holder="other:1", ttl=30, renew=False)
    assert other.acquire() is False and other.current_holder == svc.leasebook.holder

    svc.compile_ended()  # torch's compile returned without saving the graph
    assert other.acquire() is True, other.code  # released: a waiter compiles at once
    other.release()


def test_compile_that_writes_keeps_its_lease_until_the_write(torch_server: Any) -> None:
    svc = _service(torch_server.url, "leasewrite")
    key = f"pt2:{FX}::fwrite0123456789abcde:c1"
    assert svc.get(key) is None
    skey = svc.misses()[-1]["key"]
    c = Client(torch_server.url, namespace="leasewrite")
    svc.put(key, b'{"data": "graph", "time_taken_ms": 1500}')
    svc.compile_ended()  # the write, not the compile's end, releases it
    assert svc.flush(30)
    assert c.get(skey) == b'{"data": "graph", "time_taken_ms": 1500}'
    lease = c.lease(skey, holder="other:1", ttl=30, renew=False)
    assert lease.acquire() is False and lease.code == "entry_exists"
    assert not svc.leasebook.holds(key)


def test_waiter_receives_the_holders_entry(torch_server: Any) -> None:
    holder, waiter = _service(torch_server.url, "leasewait"), _service(torch_server.url, "leasewait")
    waiter.leasebook.holder = "waiter-host:1"  # another process's holder id
    key = f"pt2:{FX}::fwait0123456789abcdef:c1"
    assert holder.get(key) is None
    value = b'{"data": "compiled", "time_taken_ms": 900}'

    t = threading.Timer(0.5, lambda: (holder.put(key, value), holder.compile_ended()))
    t.start()
    try:
        assert waiter.get(key) == value  # waited on the lease, then got the entry
    finally:
        t.join()
    s = waiter.stats()
    assert s["lease_waits"] == 1 and s["lease_wait_hits"] == 1 and s["hits"] == 1 and s["misses"] == 0, s
