"""What a hit obtained by waiting on another process's compile lease saved,
as the JAX integration counts it (``compile_seconds_saved``): the compile
seconds the entry records minus the time this process waited for it, never
below zero, as the server counts the same hit. Before, such a hit added 0:
the lease wait returned the bytes without the entry's compile seconds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import urllib.request
from pathlib import Path

import pytest

import cachesvc
from conftest import run_py

SCRIPT = """
import json, sys, time
import cachesvc.jax

jax_key = sys.argv[1]
backend = cachesvc.jax.install(mode="jax-key", leases=True, lease_wait=60, background_uploads=False,
                               local_dir="")
t0 = time.monotonic()
v = backend.get(jax_key)
took = time.monotonic() - t0
print(json.dumps(dict(cachesvc.jax.stats(), got=None if v is None else v.decode(), took=took)))
"""


def _lease_waiters(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("cachesvc_lease_waiters"):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("compile_seconds,parked", [
    (100.0, 1.0),  # a long compile: the wait hit saved all but the wait
    (0.5, 1.0),    # a compile shorter than the wait: it saved nothing, not less
])
def test_jax_wait_hit_saves_compile_minus_wait(server, tmp_path: Path, compile_seconds: float, parked: float):
    jax_key = "jit_f-" + hashlib.sha256(f"wait saved {compile_seconds}".encode()).hexdigest()
    holder = cachesvc.Client(server.url)
    skey = holder.key({"backend": "passthrough", "kind": "jax", "key": jax_key}).key
    lease = holder.lease(skey, holder="another-host:1", ttl=60, renew=False)
    assert lease.acquire()

    def compile_and_write() -> None:
        deadline = time.monotonic() + 120
        while _lease_waiters(server.url) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(parked)  # the holder compiles; the JAX process waits
        holder.put(skey, b"executable", compile_seconds=compile_seconds, name=jax_key, backend="passthrough")

    t = threading.Thread(target=compile_and_write)
    t.start()
    script = tmp_path / "wait_hit.py"
    script.write_text(SCRIPT)
    try:
        st, _ = run_py(script, [jax_key], env={"CACHESVC_URL": server.url, "CACHESVC_NAMESPACE": "default"})
    finally:
        t.join()
    assert st["got"] == "executable", st
    assert (st["lease_waits"], st["lease_wait_hits"], st["hits"]) == (1, 1, 1), st
    most = max(0.0, compile_seconds - parked)
    least = max(0.0, compile_seconds - st["took"])
    assert least - 1e-6 <= st["compile_seconds_saved"] <= most + 1e-6, (st, least, most)


def test_leasebook_entry_written_since_miss_saves_its_compile(server):
    """``lease_wait=0`` and the entry written between the miss and the lease
    request (``entry_exists``): the fetch is answered at once, so it saved
    the entry's whole compile time."""
    from cachesvc._failopen import Breaker, Warner
    from cachesvc._leasebook import LeaseBook

    key = hashlib.sha256(b"entry exists saved").hexdigest()
    holder = cachesvc.Client(server.url)
    waiter = cachesvc.Client(server.url)
    assert waiter.get(key) is None  # the integration's miss
    holder.put(key, b"executable", compile_seconds=10.0)
    book = LeaseBook(waiter, ttl=60, wait=0, timeout=10,
                     warner=Warner(logging.getLogger("t"), Breaker(3, 30.0), 60.0), count=lambda name: None)
    got, saved = book.miss_saved("jax-key", key, "a program")
    assert got == b"executable"
    assert saved is not None and 9.0 <= saved <= 10.0, saved


def test_leasebook_entry_written_since_miss_counts_a_wait_hit(server):
    """The entry written between the miss and the lease request
    (``entry_exists``) is fetched as a wait (``?wait=&waited=0``), which the
    server counts in ``wait_hits``: the client counts it as a lease wait hit
    too, so that the sweep's ``lease_wait_hits`` summed over its processes
    equal the server's ``wait_hits`` (before: one fewer per such race, 10
    against 11 in a sweep of 6 arms)."""
    from cachesvc._failopen import Breaker, Warner
    from cachesvc._leasebook import LeaseBook

    key = hashlib.sha256(b"entry exists counted").hexdigest()
    holder = cachesvc.Client(server.url)
    waiter = cachesvc.Client(server.url)
    assert waiter.get(key) is None  # the integration's miss
    holder.put(key, b"executable", compile_seconds=10.0)
    counts: dict[str, int] = {}
    book = LeaseBook(waiter, ttl=60, wait=60, timeout=10,
                     warner=Warner(logging.getLogger("t"), Breaker(3, 30.0), 60.0),
                     count=lambda name: counts.__setitem__(name, counts.get(name, 0) + 1))
    got, _ = book.miss_saved("jax-key", key, "a program")
    assert got == b"executable"
    with urllib.request.urlopen(server.url + "/v1/default/stats", timeout=10) as r:
        totals = json.loads(r.read())["totals"]
    assert totals["wait_hits"] == 1 and totals["misses"] == 1, totals
    assert counts == {"lease_waits": 1, "lease_wait_hits": 1}, counts
