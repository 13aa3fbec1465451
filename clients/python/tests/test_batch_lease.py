"""Client.exists / batch / batch_get / manifest / lease against a real server."""

from __future__ import annotations

import hashlib
import os
import threading
import time

import pytest

import cachesvc


def k(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def test_exists_and_batch_get(server):
    c = cachesvc.Client(server.url)
    values = {k(f"e{i}"): os.urandom(1 + i * 20_000) for i in range(40)}
    for key, v in values.items():
        c.put(key, v, compile_seconds=1.25, name=f"jit_{key[:4]}", backend="xla")
    absent = [k(f"absent{i}") for i in range(7)]
    asked = list(values) + absent
    assert c.exists(asked) == set(values)

    got = c.batch_get(asked)
    assert got == values

    seen: list[cachesvc.BatchMember] = []
    missing = c.batch(asked, lambda m, f: seen.append(m))  # reads nothing: the rest is skipped and verified
    assert sorted(missing) == sorted(absent)
    assert [m.key for m in seen] == list(values)
    m0 = seen[0]
    assert m0.size == len(values[m0.key]) and m0.sha256 == hashlib.sha256(values[m0.key]).hexdigest()
    assert m0.compile_seconds == pytest.approx(1.25) and m0.name == f"jit_{m0.key[:4]}" and m0.backend == "xla"


def test_exists_splits_long_lists(server):
    c = cachesvc.Client(server.url)
    c.put(k("x"), b"x")
    keys = [k(f"m{i}") for i in range(cachesvc.Client.MAX_BATCH_KEYS + 50)] + [k("x")]
    assert c.exists(keys) == {k("x")}
    assert c.batch_get(keys) == {k("x"): b"x"}


def test_batch_bad_key_is_an_error(server):
    c = cachesvc.Client(server.url)
    with pytest.raises(cachesvc.Error) as ei:
        c.batch_get(["nothex"])
    assert ei.value.status == 400 and ei.value.code and ei.value.message


def test_manifest_records_run(server):
    c = cachesvc.Client(server.url, run="run-a")
    c.put(k("w"), b"w")
    assert c.get(k("r")) is None
    m = cachesvc.Client(server.url).manifest("run-a")
    by_key = {e["key"]: e for e in m["keys"]}
    assert by_key[k("w")]["written"] is True
    with pytest.raises(cachesvc.Error) as ei:
        c.manifest("no-such-run")
    assert ei.value.status == 404


def test_lease_one_compiles_others_wait(server):
    c = cachesvc.Client(server.url)
    key = k("leased")
    results: list[bytes | None] = []

    with c.lease(key, holder="compiler:1", ttl=30) as mine:
        assert mine.granted
        with c.lease(key, holder="waiter:2", ttl=30) as theirs:
            assert not theirs.granted and theirs.current_holder == "compiler:1"
            assert theirs.code == "lease_held"
            waiters = [threading.Thread(target=lambda: results.append(theirs.wait(30))) for _ in range(4)]
            for t in waiters:
                t.start()
            time.sleep(0.3)  # let them park (correctness does not depend on it)
            c.put(key, b"compiled executable")  # releases the lease, wakes the waiters
            for t in waiters:
                t.join()
    assert results == [b"compiled executable"] * 4

    with c.lease(key, holder="late:3") as late:  # the entry exists now
        assert not late.granted and late.code == "entry_exists" and late.current_holder == ""


def test_lease_holder_dies_waiter_takes_over(server):
    c = cachesvc.Client(server.url)
    key = k("abandoned")
    dead = c.lease(key, holder="dead:1", ttl=3, renew=False)
    assert dead.acquire()  # and never writes nor releases
    waiter = c.lease(key, holder="w:2", ttl=30)
    assert not waiter.acquire()
    assert waiter.wait(20) is None  # the lease expired without the entry
    assert waiter.acquire()  # now we compile
    waiter.release()


def test_lease_released_on_exit(server):
    c = cachesvc.Client(server.url)
    key = k("released")
    with c.lease(key, holder="a:1", ttl=60) as a:
        assert a.granted
    with c.lease(key, holder="b:2", ttl=60) as b:
        assert b.granted


def test_lease_bad_input(server):
    c = cachesvc.Client(server.url)
    with pytest.raises(cachesvc.Error) as ei:
        c.lease("nothex", holder="a").acquire()
    assert ei.value.status == 400
    with pytest.raises(cachesvc.Error) as ei:
        c.lease(k("t"), holder="a", ttl=-1).acquire()
    assert ei.value.status == 400 and ei.value.code == "bad_ttl"


def test_lease_one_per_process(server):
    """Two asks under one process's holder: the second is told the process
    already holds the lease (not granted, renewed) and waits for the entry,
    so one process compiles a key once; the first keeps renewing and
    releasing as the holder."""
    c = cachesvc.Client(server.url)
    key = k("one-per-process")
    with c.lease(key, holder="host:7", ttl=30) as first:
        assert first.granted and not first.renewed
        assert first.acquire() and first.granted  # its own renewal stays granted
        with c.lease(key, holder="host:7", ttl=30) as second:
            assert not second.granted and second.renewed
            assert second.code == "lease_held" and second.current_holder == "host:7"
            got: list[bytes | None] = []
            t = threading.Thread(target=lambda: got.append(second.wait(30)))
            t.start()
            c.put(key, b"compiled once")
            t.join()
            assert got == [b"compiled once"]


def test_leasebook_threads_of_one_process_compile_once(server):
    """Eight threads of one process miss one key at once (cachesvc.jax and
    cachesvc.torch under leases): one compiles, the others wait for its
    entry; a second miss on the compiling thread stays its own (a renewal)."""
    import logging

    from cachesvc._failopen import Breaker, Warner
    from cachesvc._leasebook import LeaseBook

    c = cachesvc.Client(server.url)
    skey = k("book-threads")
    counts: dict[str, int] = {}
    lock = threading.Lock()

    def count(name: str) -> None:
        with lock:
            counts[name] = counts.get(name, 0) + 1

    book = LeaseBook(c, ttl=30, wait=30, timeout=10,
                     warner=Warner(logging.getLogger("t"), Breaker(3, 30.0), 60.0), count=count)
    compiled: list[int] = []
    got: list[bytes | None] = []
    start = threading.Barrier(8)

    def trainer(i: int) -> None:
        start.wait()
        v = book.miss("jit_f-1", skey, "jit_f")
        if v is None:  # we compile
            assert book.miss("jit_f-1", skey, "jit_f") is None  # looked up again: still ours
            with lock:
                compiled.append(i)
            time.sleep(0.5)
            c.put(skey, b"exe")
            book.written("jit_f-1")
            v = b"exe"
        with lock:
            got.append(v)

    threads = [threading.Thread(target=trainer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(compiled) == 1, f"{len(compiled)} threads compiled"
    assert got == [b"exe"] * 8
    assert counts.get("leases_granted") == 1 and counts.get("lease_wait_hits") == 7
