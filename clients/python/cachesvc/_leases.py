"""Compile leases: ``POST``/``DELETE /v1/{ns}/leases/{key}`` and the
long-poll for an entry another holder is compiling."""

from __future__ import annotations

import os
import socket
import threading
import urllib.parse
from typing import TYPE_CHECKING

from ._transport import _json_body, _Transport
from ._types import Error

if TYPE_CHECKING:  # Lease.wait calls Client.get; only the type is needed here
    from .client import Client


class _Leases(_Transport):
    """The :class:`cachesvc.Client` method that takes a compile lease."""

    def lease(self, key: str, *, holder: str | None = None, ttl: float = 60.0,
              renew: bool = True) -> "Lease":
        """A compile lease on ``key``, as a context manager::

            with client.lease(key, ttl=30) as lease:
                if lease.granted:              # we compile
                    client.put(key, compile())  # the PUT releases the lease
                else:                          # someone else compiles (or it exists)
                    value = lease.wait()       # bytes, or None: compile yourself

        On exit a granted lease that was not released by a PUT is released
        (``DELETE``). With ``renew`` a background thread renews it every
        ``ttl/4`` seconds while the block runs, so long compiles keep it.
        """
        return Lease(self, key, holder or default_holder(), ttl, renew)


def default_holder() -> str:
    """A lease holder id naming this process: ``<host>:<pid>``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def process_holder() -> str:
    """:func:`default_holder` plus, where there is one, ``@<PID namespace
    id>``: the holder id ``cachesvc.jax`` takes leases under, which
    :func:`holder_exited` can check (containers on one host may share its
    name, never a PID namespace)."""
    ns = _pid_namespace()
    return default_holder() + (f"@{ns}" if ns else "")


def _pid_namespace() -> str:
    """This process's PID namespace id (Linux), or ""."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def holder_exited(holder: str) -> bool:
    """Whether ``holder`` (a :func:`process_holder` id) names a process of
    this host and PID namespace that no longer runs: one killed while it held
    a lease, whose lease then lasts until its TTL runs out. False when it
    cannot tell (another host or namespace, another holder format)."""
    who, at, ns = holder.partition("@")
    if os.name != "posix" or not at or not ns or ns != _pid_namespace():
        return False
    host, sep, pid = who.rpartition(":")
    if not sep or host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # it exists but is not ours (EPERM), or no such pid number
        return False
    return False


class Lease:
    """A compile lease (see :meth:`Client.lease`).

    Attributes:
        key: the entry key.
        holder: our holder id.
        granted: True when we hold the lease (we compile).
        current_holder: who holds it when not granted ("" when the entry
            already exists: fetch it).
        expires: the lease expiry as the server reported it (RFC 3339).
        code: the server's code when not granted (``lease_held`` /
            ``entry_exists``).
        renewed: True when our holder already held the live lease before
            this object asked for it: another thread (or Lease) of this
            process compiles the key. Then ``granted`` is False,
            ``current_holder`` is our holder and ``code`` is
            ``lease_held``: :meth:`wait` for its entry instead of compiling
            it a second time. (Holders name a process, so the server
            renews rather than refuses; a server older than this answer
            never says so, and both askers compile.)
    """

    def __init__(self, client: Client, key: str, holder: str, ttl: float, renew: bool) -> None:
        self.client = client
        self.key = key
        self.holder = holder
        self.ttl = ttl
        self.renew_in_background = renew
        self.granted = False
        self.current_holder = ""
        self.expires = ""
        self.code = ""
        self.renewed = False
        self._ours = False  # this object took the lease: its renewals stay granted
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self, *, timeout: float | None = None) -> bool:
        """Asks for (or renews) the lease; returns :attr:`granted`.
        ``timeout`` bounds the call (default: the client's)."""
        r = self.client._json("POST", self.client._ns_path("leases", self.key),
                              {"holder": self.holder, "ttl_s": self.ttl}, ok=(201,), allow=(409,),
                              timeout=timeout)
        doc = _json_body(r)
        self.current_holder = str(doc.get("holder", ""))
        self.expires = str(doc.get("expires", ""))
        err = doc.get("error")
        self.code = str(err.get("code", "")) if isinstance(err, dict) else ""
        self.renewed = r.status == 201 and doc.get("renewed") is True and not self._ours
        if self.renewed:  # held by another part of this process: it compiles
            self.granted = False
            self.code = "lease_held"
            return False
        self.granted = r.status == 201
        self._ours = self.granted
        return self.granted

    def wait(self, timeout: float = 3600.0) -> bytes | None:
        """Long-polls for the entry another holder is compiling: its bytes, or
        None when the lease ended without it or ``timeout`` ran out (then
        compile yourself).

        The default is the integrations' ``lease_wait`` (3600 s): the wait
        ends as soon as the holder's lease ends without the entry (released,
        or expired after a holder died), so a long one only waits out a
        holder that is alive and renewing its lease while it compiles, and
        that beats compiling the program a second time. The wait goes out in
        ``wait_slice`` slices, each marked as following this client's miss
        (see :meth:`Client.get`)."""
        try:
            return self.client.get(self.key, wait=timeout)
        except Error as e:
            if e.status == 503:  # too many waiters: compile yourself
                return None
            raise

    def release(self) -> None:
        """Releases the lease without writing (no-op if not held)."""
        self._stop.set()
        if not self.granted:
            return
        self.granted = False
        self._ours = False
        path = self.client._ns_path("leases", self.key) + "?holder=" + urllib.parse.quote(self.holder, safe="")
        r = self.client._request("DELETE", path, ok=(200, 204), allow=(404, 409))
        r.read_all(limit=1 << 20)

    def start_renewing(self) -> None:
        """Renews a granted lease every ``ttl/4`` seconds (a failed renewal
        again after ``ttl/12``) from a background thread until it is
        released, :meth:`stop_renewing` is called or a renewal is refused
        (the entry was written, or another holder took it): a compile longer
        than ``ttl`` keeps its lease."""
        if self.granted and self._thread is None:
            self._thread = threading.Thread(target=self._renew_loop, name=f"cachesvc-lease-{self.key[:8]}",
                                            daemon=True)
            self._thread.start()

    def stop_renewing(self) -> None:
        """Stops the background renewal (the lease stays until it expires or
        a PUT of the entry releases it)."""
        self._stop.set()

    def _renew_loop(self) -> None:
        # Every ttl/4, so that a renewal delayed on a loaded host (or one that
        # failed) still has two more chances before the lease expires; a
        # failed one is tried again sooner, each try bounded by ttl/4 so that
        # a hung server cannot hold the loop past the expiry.
        every = max(0.5, self.ttl / 4)
        wait = every
        while not self._stop.wait(wait):
            try:
                if not self.acquire(timeout=every):
                    return
                wait = every
            except Error:
                wait = max(0.5, self.ttl / 12)  # the next attempt, or expiry, decides

    def __enter__(self) -> "Lease":
        if self.acquire() and self.renew_in_background:
            self.start_renewing()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.release()
        except Error:
            pass  # it expires by itself
