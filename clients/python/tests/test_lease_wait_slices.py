"""Long polls (``GET ?wait=``) that outlast a proxy's read timeout, and lease
waits longer than one request.

A real nginx with ``proxy_read_timeout 3s`` stands between the waiting client
and a real server: the client waits in slices, learns the proxy's cut from
its first 504 and continues with ``&waited=``, and the server counts one
miss and one wait for it all and saves only the compile time that was not
waited through.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

import cachesvc
from conftest import free_port


def k(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def start_nginx(tmp: Path, upstream: str, read_timeout: str) -> tuple[str, subprocess.Popen]:
    """nginx in the foreground proxying to ``upstream`` (host:port) with the
    README's settings but ``proxy_read_timeout`` set to ``read_timeout``."""
    binary = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if binary is None:
        if os.environ.get("CACHESVC_REQUIRE_NGINX"):
            pytest.fail("nginx not found and CACHESVC_REQUIRE_NGINX is set: apt-get install -y nginx")
        pytest.skip("nginx not found: apt-get install -y nginx (CACHESVC_REQUIRE_NGINX=1 makes this a failure)")
    port = free_port()
    user = "user root;\n" if os.geteuid() == 0 else ""
    conf = f"""{user}worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fcgi; uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
  upstream cachesvc {{ server {upstream}; keepalive 16; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://cachesvc;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      client_max_body_size 0;
      proxy_request_buffering off;
      proxy_buffering off;
      proxy_read_timeout {read_timeout};
    }}
  }}
}}
"""
    (tmp / "nginx.conf").write_text(conf)
    log = open(tmp / "stderr.log", "wb")
    proc = subprocess.Popen([binary, "-p", str(tmp), "-c", str(tmp / "nginx.conf"), "-g", "daemon off;"],
                            stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"nginx exited {proc.returncode}: {(tmp / 'stderr.log').read_text()}"
                               f"{(tmp / 'error.log').read_text() if (tmp / 'error.log').exists() else ''}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return f"http://127.0.0.1:{port}", proc
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("nginx did not listen")


def totals(url: str) -> dict:
    with urllib.request.urlopen(url + "/v1/stats", timeout=10) as r:
        return json.load(r)["totals"]


@pytest.mark.parametrize("via_proxy,wait,compile_for", [
    # nginx cuts every long poll after 3 s; the holder compiles for 7 s.
    (True, 20.0, 7.0),
    # No proxy; a lease_wait above the server's 300 s bound on one ?wait=
    # (3600 s, the integrations' default) is sent in slices, not refused.
    (False, 3600.0, 3.0),
])
def test_lease_wait_slices(start_server, tmp_path: Path, via_proxy: bool, wait: float, compile_for: float):
    s = start_server()
    url = s.url
    if via_proxy:
        url, proc = start_nginx(tmp_path, s.url.removeprefix("http://"), "3s")
    try:
        key = k(f"slices {via_proxy}")
        holder = cachesvc.Client(s.url)
        waiter = cachesvc.Client(url)
        assert waiter.get(key) is None  # the miss the wait answers
        with holder.lease(key, holder="holder", ttl=2) as lease:  # renewed every 0.67 s meanwhile
            assert lease.granted

            def compile_and_write() -> None:
                time.sleep(compile_for)
                holder.put(key, b"executable", compile_seconds=100.0)

            t = threading.Thread(target=compile_and_write)
            t.start()
            started = time.monotonic()
            got = waiter.get(key, wait=wait)
            waited = time.monotonic() - started
            t.join()
        assert got == b"executable"
        if via_proxy:
            assert waiter.wait_slice <= 0.8 * 3.5, waiter.wait_slice  # learned from the cut
        tot = totals(s.url)
        assert (tot["lookups"], tot["hits"], tot["misses"], tot.get("wait_hits", 0)) == (2, 1, 1, 1), tot
        # The hit saved the compile time minus the whole wait, every slice.
        assert tot.get("compile_seconds_saved", 0) <= 100.0 - waited + 0.5, (tot, waited)
    finally:
        if via_proxy:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_lease_wait_ends_when_the_lease_ends(start_server, tmp_path: Path):
    """Through the proxy, a holder that gives up without writing (its lease
    released) ends the waiter's sliced wait with a miss: it compiles itself,
    and the server counts one miss for the whole wait."""
    s = start_server()
    url, proc = start_nginx(tmp_path, s.url.removeprefix("http://"), "3s")
    try:
        key = k("lease ends")
        holder = cachesvc.Client(s.url)
        waiter = cachesvc.Client(url)
        assert waiter.get(key) is None
        lease = holder.lease(key, holder="holder", ttl=60, renew=False)
        assert lease.acquire()
        threading.Timer(5.0, lease.release).start()
        assert waiter.get(key, wait=60) is None
        tot = totals(s.url)
        assert (tot["lookups"], tot["misses"]) == (1, 1), tot
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize("how", ["get", "lease.wait", "leasebook"])
def test_failed_lease_wait_counts_one_miss(server, how: str):
    """A client that missed (a plain GET, counted) and then waits for a
    holder whose lease ended without the entry (released before the wait
    parked) gets None and compiles: the server counts that one miss, not a
    second for the wait. Every slice of the client's long poll carries
    ``waited`` (0 on the first), so misses minus wait hits stays the
    compiles run. Through ``get(wait=)``, ``Lease.wait`` and the JAX and
    torch integrations' ``LeaseBook``."""
    from cachesvc._failopen import Breaker, Warner
    from cachesvc._leasebook import LeaseBook

    key = k(f"failed wait {how}")
    holder = cachesvc.Client(server.url)
    waiter = cachesvc.Client(server.url)
    assert waiter.get(key) is None  # the miss the wait answers
    theirs = holder.lease(key, holder="holder", ttl=60, renew=False)
    assert theirs.acquire()
    mine = waiter.lease(key, holder="waiter", ttl=60, renew=False)
    assert not mine.acquire() and mine.code == "lease_held"
    theirs.release()  # the holder gave up before the waiter parked
    if how == "get":
        got = waiter.get(key, wait=5)
    elif how == "lease.wait":
        got = mine.wait()
    else:
        counts: dict[str, int] = {}
        book = LeaseBook(waiter, ttl=60, wait=5, timeout=10,
                         warner=Warner(logging.getLogger("t"), Breaker(3, 30.0), 60.0),
                         count=lambda name: counts.__setitem__(name, counts.get(name, 0) + 1))
        got = book.miss("jax-key", key, "a program", may_hold=False)
        assert counts == {"lease_waits": 1}, counts
    assert got is None
    tot = totals(server.url)
    assert (tot["lookups"], tot["hits"], tot["misses"], tot.get("wait_hits", 0)) == (1, 0, 1, 0), tot


@pytest.mark.parametrize("written", [False, True])
def test_lease_wait_zero_counts_no_extra_lookup(server, written: bool):
    """``lease_wait=0`` (do not wait for another holder): a miss that finds
    the lease held compiles at once without another lookup (before, a plain
    GET counted a second miss), and one that finds the entry written since
    its lookup (``entry_exists``) fetches it as a wait (``waited=0``), so its
    hit counts in ``wait_hits`` and misses minus wait hits stays 0 compiles."""
    from cachesvc._failopen import Breaker, Warner
    from cachesvc._leasebook import LeaseBook

    key = k(f"lease_wait 0 {written}")
    holder = cachesvc.Client(server.url)
    waiter = cachesvc.Client(server.url)
    assert waiter.get(key) is None  # the integration's miss
    if written:
        holder.put(key, b"executable", compile_seconds=10.0)
    else:
        assert holder.lease(key, holder="holder", ttl=60, renew=False).acquire()
    book = LeaseBook(waiter, ttl=60, wait=0, timeout=10,
                     warner=Warner(logging.getLogger("t"), Breaker(3, 30.0), 60.0), count=lambda name: None)
    got = book.miss("jax-key", key, "a program")
    assert got == (b"executable" if written else None)
    tot = totals(server.url)
    want = (2, 1, 1, 1) if written else (1, 0, 1, 0)
    assert (tot["lookups"], tot["hits"], tot["misses"], tot.get("wait_hits", 0)) == want, tot


def test_lease_wait_default_matches_the_integrations():
    """``Lease.wait()`` waits as long by default as the integrations'
    ``lease_wait`` (3600 s): the wait ends as soon as the holder's lease
    ends without the entry, so a long default only waits out a holder that
    is alive and compiling, which beats compiling the program again. Before,
    ``Lease.wait`` gave up after 60 s and compiled a second time what a
    JAX or torch install on the same key waited for."""
    import inspect

    import cachesvc.jax
    import cachesvc.torch
    from cachesvc import Lease

    defaults = {
        "Lease.wait(timeout)": inspect.signature(Lease.wait).parameters["timeout"].default,
        "cachesvc.jax.install(lease_wait)": inspect.signature(cachesvc.jax.install).parameters["lease_wait"].default,
        "cachesvc.torch.install(lease_wait)": inspect.signature(cachesvc.torch.install).parameters["lease_wait"].default,
    }
    assert set(defaults.values()) == {3600.0}, defaults
