"""The compile leases one install holds, for cachesvc.jax and cachesvc.torch.

A miss takes the server's compile lease on its key (``POST /leases``) or, when
another process holds it, long-polls for that process's entry. A lease we hold
ends in one of three ways:

* our write of the entry: the server releases a lease when its entry is PUT
  (:meth:`LeaseBook.written`);
* the write failed or was dropped: we release it (:meth:`LeaseBook.release`);
* the compile ended without a write (the compiler wrote nothing: a program it
  does not cache, a compile that raised): we release it, so waiters compile at
  once instead of waiting ``lease_wait`` for an entry that never comes
  (:meth:`LeaseBook.compile_ended`, called by a wrapper of the compiler's
  compile step where the integration has one).

Where compile_ended is called (``renew``), held leases are renewed every
``ttl/4`` s from a background thread until they end, so a compile longer than
``ttl`` keeps its lease; otherwise a lease lasts until the write or its TTL
(a compile longer than that is then compiled by a waiter too).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from ._failopen import Warner
from ._leases import holder_exited, process_holder
from ._types import Error

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger("cachesvc")


class LeaseBook:
    """Takes, waits on and ends the compile leases of one install.

    Book keys are the integration's own keys (JAX's cache key, torch's remote
    cache key), each mapped to the server key its lease is on. ``count(name)``
    adds one to the install's counter ``leases_granted``, ``lease_waits`` or
    ``lease_wait_hits``.
    """

    def __init__(self, client: Client, *, ttl: float, wait: float, timeout: float, warner: Warner,
                 count: Callable[[str], None], hung_after: float | None = None) -> None:
        self.client = client
        # The integration's first-byte timeout: a wait notices a hung server
        # after about that much more than its slice (Client._long_poll).
        self.hung_after = hung_after
        self.ttl = ttl
        self.wait = wait
        self.timeout = timeout
        self.warner = warner
        self.count = count
        self.holder = process_holder()
        # compile_ended will be called (the integration wrapped its compile
        # step): track each thread's leases and renew them until they end.
        self.renew = False
        self._lock = threading.Lock()
        self._held: dict[str, Any] = {}  # book key -> cachesvc.Lease we hold
        self._owner: dict[str, int] = {}  # book key -> id of the thread that took its lease
        self._writing: set[str] = set()  # held keys whose write was started (the write ends them)
        self._taken = threading.local()  # .keys: leases this thread took since its last compile ended

    def miss(self, key: str, skey: str, what: str, *, may_hold: bool = True) -> bytes | None:
        """On a miss of server key ``skey``: take its lease (None: the caller
        compiles) or wait for the holder's entry (its bytes, or None when it
        never came: compile). ``what`` names the program in warnings. Only a
        process that will write the entry (``may_hold``) takes leases; the
        others wait. A wait whose holder's lease expired without the entry
        (killed, or cut off from the server) takes the lease over when this
        process may hold it: one waiter compiles, the others wait again.
        Raises :class:`cachesvc.Error` when the server failed."""
        return self.miss_saved(key, skey, what, may_hold=may_hold)[0]

    def miss_saved(self, key: str, skey: str, what: str, *,
                   may_hold: bool = True) -> tuple[bytes | None, float | None]:
        """:meth:`miss`, and the compile seconds its entry saved: the
        seconds the entry records minus the time waited for it, never below
        zero (the server counts the hit the same way), or None when nothing
        came or the entry records no compile time. The integrations add it
        to ``compile_seconds_saved``, as they add a plain hit's."""
        if may_hold:
            with self._lock:
                mine = self._held.get(key)
                here = self._owner.get(key) == threading.get_ident()
            if mine is not None and here:
                # Looked up twice on the thread that compiles it (JAX probes
                # a PGLE key first): one renewal, and this thread compiles.
                self._renew(mine)
                return None, None
            if mine is None:
                wait, got = self._take(key, skey, what)
                if not wait:
                    return got
            # Else another thread of this process compiles it (its lease, or
            # the server said our holder already held it): wait for its entry
            # instead of compiling the program a second time.
        if self.wait <= 0:
            # lease_wait=0: compile at once. A plain GET here would count a
            # second miss for this one lookup (a wait marks itself waited).
            return None, None
        self.count("lease_waits")
        deadline = time.monotonic() + self.wait
        while True:
            try:
                v, miss, saved = self.client._wait_get(skey, wait=deadline - time.monotonic(), timeout=self.timeout,
                                                       hung_after=self.hung_after)
            except Error as exc:
                if exc.status == 503:  # too many waiters: compile ourselves
                    return None, None
                raise
            if v is not None:
                self.count("lease_wait_hits")
            elif miss is not None and miss.code == "wait_timeout":
                self.warner.notice(
                    f"waited {self.wait:g}s (lease_wait) for another process to compile {what} and it has "
                    f"not written it ({miss.message.rstrip('.')}); compiling here. A holder killed while "
                    f"compiling keeps its lease for its lease_ttl")
            elif may_hold and (dead := _expired_holder(miss)) is not None and time.monotonic() < deadline:
                # The holder stopped renewing (killed, or cut off from the
                # server): take its lease over rather than compile, so that
                # one waiter compiles and the others go on waiting. Before,
                # every waiter compiled the program at once.
                wait, got = self._take(key, skey, what)
                if wait:
                    continue  # another waiter took it over: wait for its entry
                if self.holds(key):
                    self.warner.notice(
                        f"the compile lease on {what} held by {dead!r} expired without "
                        f"its entry (that process was killed, or lost the server); compiling here under a new "
                        f"lease while the other processes wait for it")
                return got
            return v, saved

    def _take(self, key: str, skey: str, what: str) -> tuple[bool, tuple[bytes | None, float | None]]:
        """Asks for the lease on ``skey``: (True, _) when another holder,
        or another thread of this process, compiles it (wait for it);
        otherwise (False, the entry's bytes and what they saved, as
        :meth:`miss_saved` returns them, when it was written since our
        lookup, else (None, None): compile, under the lease when it was
        granted)."""
        lease = self.client.lease(skey, holder=self.holder, ttl=self.ttl, renew=False)
        try:
            granted = lease.acquire()
        except Error as exc:
            if exc.status == 0:
                raise
            # e.g. 503 lease_table_full: compile without a lease.
            log.debug("cachesvc: no lease on %s: %s", skey, exc)
            return False, (None, None)
        if granted:
            self._hold(key, lease)
            return False, (None, None)
        if lease.code == "entry_exists":  # written since our lookup
            # As a ?wait= GET (answered at once), so that the server
            # counts this hit as answering our miss, not as a compile: a
            # wait even when lease_wait is 0 (the entry is there to take).
            v, _, saved = self.client._wait_get(skey, timeout=self.timeout, wait=max(self.wait, 1.0))
            # The server counts that hit in wait_hits: count it alike, so
            # that the processes' lease_wait_hits add up to its figure.
            self.count("lease_waits")
            if v is not None:
                self.count("lease_wait_hits")
            return False, (v, saved)
        if holder_exited(lease.current_holder):
            # Killed while compiling (then restarted): its lease lasts
            # until its TTL, and waiting would only stall this job.
            self.warner.notice(
                f"the compile lease on {what} is held by {lease.current_holder}, a process on this "
                f"host that no longer runs (killed while compiling?); compiling here instead of "
                f"waiting for its lease to expire ({lease.expires})")
            return False, (None, None)
        return True, (None, None)

    @staticmethod
    def _renew(lease: Any) -> None:
        try:
            lease.acquire()
        except Error:
            pass  # the next renewal, or expiry, decides

    def _hold(self, key: str, lease: Any) -> None:
        with self._lock:
            self._held[key] = lease
            self._owner[key] = threading.get_ident()
        self.count("leases_granted")
        if self.renew:  # compile_ended will be called: track, and renew
            taken = getattr(self._taken, "keys", None)
            if taken is None:
                taken = self._taken.keys = set()
            taken.add(key)
            lease.start_renewing()  # a compile longer than the TTL keeps its lease

    def holds(self, key: str) -> bool:
        """Whether a lease on ``key`` is held."""
        with self._lock:
            return key in self._held

    def writing(self, key: str) -> None:
        """The entry of ``key`` is being written: the write, not the end of
        the compile, ends its lease (:meth:`written` or :meth:`release`)."""
        with self._lock:
            if self.renew and key in self._held:
                self._writing.add(key)

    def written(self, key: str) -> None:
        """The entry of ``key`` was stored: the server released its lease."""
        with self._lock:
            lease = self._held.pop(key, None)
            self._owner.pop(key, None)
            self._writing.discard(key)
        if lease is not None:
            lease.granted = False
            lease.stop_renewing()

    def release(self, key: str) -> None:
        """Releases the lease on ``key`` if it is still held (best effort:
        otherwise it expires by itself)."""
        with self._lock:
            lease = self._held.pop(key, None)
            self._owner.pop(key, None)
            self._writing.discard(key)
        if lease is not None:
            try:
                lease.release()
            except Exception:  # noqa: BLE001 - it expires by itself
                pass

    def compile_ended(self, key: str | None = None) -> None:
        """This thread's compile (of ``key``, where the caller knows it)
        returned or raised: releases the leases the thread took since its
        last compile ended, and ``key``'s, except those being written (the
        write ends them). Leases taken for keys that were then not compiled
        (JAX's probes of a PGLE key) end here too: compilers compile on the
        thread that looked the key up."""
        taken = getattr(self._taken, "keys", None) or set()
        self._taken.keys = set()
        if key is not None:
            taken.add(key)
        for k in taken:
            with self._lock:
                if k in self._writing:
                    continue
            self.release(k)

    def release_all(self) -> None:
        """Releases every lease still held (best effort), e.g. at exit."""
        with self._lock:
            held, self._held = self._held, {}
            self._owner.clear()
            self._writing.clear()
        for lease in held.values():
            try:
                lease.release()
            except Exception:  # noqa: BLE001 - it expires by itself
                pass


def _expired_holder(miss: Error | None) -> str | None:
    """The holder whose lease expired without its entry when a wait's miss
    says so (the server's ``details``), else None: the lease was released,
    or an older server sent no details (then compile, as before)."""
    details = None if miss is None else miss.details
    if isinstance(details, dict) and details.get("lease") == "expired":
        return str(details.get("holder") or "")
    return None
