"""The fail-open service behind every torch remote-cache backend of one install.

torch builds one backend per ``RemoteCache`` instance (``backend_override_cls()``);
they all share this service: one :class:`cachesvc.Client`, one breaker, one
upload queue, one set of counters.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from .._failopen import Breaker, Uploader, Warner, write_timeout
from .._leasebook import LeaseBook
from ..client import Client, Error
from ._autotune import AutotuneHold

# The time budget of one report of a value torch could not load (_heal.py),
# in seconds: it runs in torch's compile path.
_REPORT_TIMEOUT = 3.0
from . import _candidates, _keys

log = logging.getLogger("cachesvc.torch")

_TIME_TAKEN_RE = re.compile(rb'"time_taken_ms"\s*:\s*(-?\d+(?:\.\d+)?)')


@dataclass
class CacheStats:
    """Counters of one install (read them with :func:`cachesvc.torch.stats`)."""

    lookups: int = 0  # lookups the server answered (hits + misses + guard_misses)
    hits: int = 0
    misses: int = 0
    errors: int = 0  # lookups that failed (a miss for torch)
    skipped: int = 0  # calls not made because the circuit breaker was open
    puts: int = 0
    put_created: int = 0
    put_existing: int = 0
    put_conflicts: int = 0
    put_errors: int = 0
    put_dropped: int = 0  # writes not made because the upload queue was full
    hit_bytes: int = 0
    put_bytes: int = 0
    lookup_seconds: float = 0.0
    put_seconds: float = 0.0
    compile_seconds_saved: float = 0.0  # the X-Compile-Seconds of the hits (less the wait of a lease wait hit)
    compile_seconds_written: float = 0.0  # the compile time sent with the writes
    components_captured: int = 0  # graphs whose components were captured
    components_seconds: float = 0.0  # time spent deriving them
    mega_saved: int = 0
    mega_conflicts: int = 0  # save() found the run's blob already written with other bytes (kept)
    mega_loaded: int = 0
    mega_bytes: int = 0
    load_failures: int = 0  # values from the server torch could not load (then a miss)
    reports: int = 0  # ... reported to the server
    reports_quarantined: int = 0  # ... whose report found the entry quarantined
    leases_granted: int = 0  # FX graph misses this process compiled under a lease
    lease_waits: int = 0  # FX graph misses that waited for another process's compile
    lease_wait_hits: int = 0  # ... and received its entry (counted as hits)
    autotune_superseded: int = 0  # autotune records replaced by a later save of the kernel (not written)
    autotune_held: int = 0  # autotune records held now, not yet settled (set by stats())
    guard_misses: int = 0  # remote candidates whose shape guards failed here (not counted as hits)
    candidates_written: int = 0  # graphs written as another shape class's candidate of a key (_candidates)
    candidates_full: int = 0  # ... not written: the key's SLOTS candidates all failed their guards
    by_cache: dict[str, dict[str, int]] = field(default_factory=dict)  # cache id -> counts


def time_taken_seconds(value: bytes) -> float | None:
    """The ``time_taken_ms`` torch records inside a JSON value, in seconds.

    Searched in the bytes rather than parsed: the value is mostly one large
    base64 string (which contains no quotes), and the field comes last.
    """
    tail = value[-256:]
    m = _TIME_TAKEN_RE.search(tail) or _TIME_TAKEN_RE.search(value)
    if m is None:
        return None
    try:
        return max(0.0, float(m.group(1)) / 1000.0)
    except ValueError:
        return None


# The cache whose misses take compile leases (_lease.py).
_LEASED_CACHE = "fx-graph"
# Dynamo's PGO profiles: written once, in their last state, at flush (put).
_PGO_CACHE = "dynamo-pgo"
# The per-kernel autotune records (_cache_of): held until settled (_autotune).
_AUTOTUNE_CACHE = "autotune"


def _cache_of(full_key: str) -> str:
    parts = _keys.split_key(full_key)
    if parts is None:
        return "other"
    cache = parts[0]
    # Autotune caches are named by a digest per kernel: count them together.
    return cache if "-" in cache else _AUTOTUNE_CACHE


class Service:
    """Looks up and writes torch's remote-cache values; never raises into torch."""

    _MAX_PENDING = 1024  # misses remembered until their write
    _MAX_MISSES = 64  # recent misses kept with the server's explanation
    _MAX_AUTOTUNE_HELD = 256  # autotune records held at once (~300 bytes each); beyond, the oldest is written

    def __init__(self, client: Client, *, timeout: float, put_timeout: float | None,
                 breaker: Breaker, warn_interval: float, components: _keys.ComponentMap | None,
                 background_uploads: bool, upload_queue_bytes: int, flush_at_exit: float,
                 lookup_timeout: float | None = None, leases: bool = False, lease_ttl: float = 30.0,
                 lease_wait: float = 3600.0, autotune_settle: float = 30.0) -> None:
        self.client = client
        self.timeout = timeout
        self.lookup_timeout = lookup_timeout
        self.put_timeout = put_timeout
        self.breaker = breaker
        self.warner = Warner(log, breaker, warn_interval)
        self.load_warner = Warner(log, breaker, warn_interval)  # entries that failed to load
        self.components = components
        self.flush_at_exit = flush_at_exit
        self._stats = CacheStats()
        self._lock = threading.Lock()
        self._pending: collections.OrderedDict[str, tuple[str, float]] = collections.OrderedDict()
        self._profiles: dict[str, bytes] = {}  # PGO profiles held until flush (put)
        # Autotune records held until settled (_hold_autotune), written by
        # one settle thread per process when quiet for autotune_settle s.
        self._autotune = AutotuneHold(self._MAX_AUTOTUNE_HELD, autotune_settle)
        self._settle_cv = threading.Condition(self._lock)
        self._settle_thread: threading.Thread | None = None
        self._settle_pid = os.getpid()
        self._settling = 0  # records the settle thread took and has not submitted yet
        self._misses: collections.deque[dict[str, Any]] = collections.deque(maxlen=self._MAX_MISSES)
        self._hit = threading.local()  # server key of this thread's last hit (_heal)
        self.slots = _candidates.Slots()  # shape classes of one key
        # Seconds of C++ builds (_cpp) not yet taken out of an FX graph's
        # compile time: see fx_graph_seconds.
        self._cpp_unclaimed = 0.0
        # Compile leases on FX graph misses, taken once _lease's wrapper is in
        # place (install sets leasebook.renew): it ends the leases of a
        # compile that wrote nothing.
        self.leasebook = LeaseBook(client, ttl=lease_ttl, wait=lease_wait, timeout=timeout,
                                   warner=Warner(log, breaker, warn_interval), count=self._add_one,
                                   hung_after=lookup_timeout) if leases else None
        self.uploader = Uploader(self._write, max_items=1024, max_bytes=upload_queue_bytes,
                                 give_up=lambda: not self.breaker.allow()) if background_uploads else None

    # ---- bookkeeping -------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """A snapshot of the counters, plus the breaker state and the run id."""
        with self._lock:
            d = asdict(self._stats)
            d["autotune_held"] = len(self._autotune)
        if self.components is not None:
            d["components_captured"] = self.components.captured
            d["components_seconds"] = self.components.seconds
        d["breaker_open"] = not self.breaker.allow()
        d["run"] = self.client.run
        return d

    def misses(self) -> list[dict[str, Any]]:
        """The recent misses: torch key, cache, server key, the components
        sent and the server's explanation (newest last)."""
        with self._lock:
            return [dict(m) for m in self._misses]

    def _count(self, cache: str, what: str, n: int = 1) -> None:
        c = self._stats.by_cache.setdefault(cache, {})
        c[what] = c.get(what, 0) + n

    def _add_one(self, counter: str) -> None:
        with self._lock:
            setattr(self._stats, counter, getattr(self._stats, counter) + 1)

    def add(self, **deltas: float) -> None:
        """Adds to named counters (for the Mega-Cache functions)."""
        with self._lock:
            for k, v in deltas.items():
                setattr(self._stats, k, getattr(self._stats, k) + v)

    def signature(self, full_key: str) -> dict[str, Any]:
        """The pt2 signature of a torch key, with any captured components."""
        graph: dict[str, str] = {}
        parts = _keys.split_key(full_key)
        if parts is not None and self.components is not None:
            graph = self.components.get(_candidates.torch_key(parts[1]))
        return _keys.signature(full_key, graph)

    # ---- reads ------------------------------------------------------------------------

    def get(self, full_key: str) -> bytes | None:
        """The value stored under torch key ``full_key`` (or under the
        candidate of it that ``slots.at`` names on this thread), or None (a
        miss, or any failure: torch then compiles)."""
        key = self.slots.lookup_key(full_key)
        if key is None:
            return None
        return self.lookup(self.signature(key), _cache_of(key), key)

    def guard_missed(self, full_key: str, slot: int) -> None:
        """torch rejected candidate ``slot`` of ``full_key`` on its shape
        guards: the hit counted for it was none, and unless all
        ``_candidates.SLOTS`` are taken, this process's write of the key goes
        to the next slot."""
        hit = getattr(self._hit, "last", None)
        self._hit.last = None
        with self._lock:
            self._stats.guard_misses += 1
            if hit is not None:
                cache, saved = hit
                self._stats.hits -= 1
                self._stats.compile_seconds_saved -= saved
                self._count(cache, "hits", -1)
                self._count(cache, "guard_misses")
        if not self.slots.rejected(full_key, slot):
            self._add_one("candidates_full")

    def lookup(self, sig: dict[str, Any], cache: str, pending_id: str) -> bytes | None:
        """Looks a signature up; None on a miss or any failure. A miss's server
        key is remembered under ``pending_id`` for the write that follows."""
        self._hit.last = None  # (cache, compile seconds) of a hit, for guard_missed
        if not self.breaker.allow():
            with self._lock:
                self._stats.skipped += 1
            return None
        t0 = time.monotonic()
        try:
            res = self.client.lookup_result(sig, timeout=self.timeout, first_byte_timeout=self.lookup_timeout)
        except Exception as exc:  # noqa: BLE001 - a failure is a miss
            with self._lock:
                self._stats.errors += 1
                self._stats.lookup_seconds += time.monotonic() - t0
                self._count(cache, "errors")
            self.warner.failed(f"lookup of {cache} entry", exc)
            return None
        self.breaker.success()
        if res.value is None and res.key and self._leased(cache):
            waited, saved = self._lease_or_wait(pending_id, res.key, cache)
            if waited is not None:
                # It saved the entry's compile time less the wait, as the
                # server counts it (a miss's result has no compile time).
                res = dataclasses.replace(res, value=waited, compile_seconds=saved, explanation=None)
        now = time.monotonic()
        with self._lock:
            self._stats.lookups += 1
            self._stats.lookup_seconds += now - t0
            if res.value is None:
                self._stats.misses += 1
                self._count(cache, "misses")
                if res.key:
                    self._pending[pending_id] = (res.key, now)
                    self._pending.move_to_end(pending_id)
                    while len(self._pending) > self._MAX_PENDING:
                        self._pending.popitem(last=False)
                self._misses.append({"torch_key": pending_id, "cache": cache, "key": res.key,
                                     "signature": sig, "explanation": res.explanation})
            else:
                self._hit.key = res.key
                self._hit.last = (cache, res.compile_seconds or 0.0)
                self._stats.hits += 1
                self._stats.hit_bytes += len(res.value)
                self._stats.compile_seconds_saved += res.compile_seconds or 0.0
                self._count(cache, "hits")
                self._count(cache, "hit_bytes", len(res.value))
        if res.value is None:
            log.debug("cachesvc: miss %s (%s): %s", pending_id, res.key, res.explanation)
        return res.value

    def _leased(self, cache: str) -> bool:
        return self.leasebook is not None and self.leasebook.renew and cache.startswith(_LEASED_CACHE)

    def _lease_or_wait(self, pending_id: str, skey: str, cache: str) -> tuple[bytes | None, float | None]:
        """Takes the compile lease on a miss (None: torch compiles) or waits
        for the holder's entry, with the compile seconds it saved
        (:meth:`LeaseBook.miss_saved`); any failure is a miss."""
        assert self.leasebook is not None
        parts = _keys.split_key(pending_id)
        what = f"{cache} graph {parts[1][:16] if parts else skey[:16]}"
        try:
            return self.leasebook.miss_saved(pending_id, skey, what)
        except Exception as exc:  # noqa: BLE001 - a failure is a miss
            self.warner.failed(f"compile lease of {what}", exc)
            return None, None

    def compile_ended(self) -> None:
        """Inductor's compile of one FX graph on this thread returned or
        raised (``_lease``): ends the leases it took that are not being written."""
        if self.leasebook is not None:
            self.leasebook.compile_ended()

    def release_leases(self) -> None:
        """Releases every lease still held (best effort)."""
        if self.leasebook is not None:
            self.leasebook.release_all()

    def take_hit(self) -> str | None:
        """The server key of this thread's last hit, cleared."""
        k = getattr(self._hit, "key", None)
        self._hit.key = None
        return k

    def load_failed(self, server_key: str, reason: str) -> None:
        """torch could not load the value served under ``server_key``: report
        it (within REPORT_TIMEOUT, respecting the breaker); never raises."""
        with self._lock:
            self._stats.load_failures += 1
        # Rate-limited: one bad upload can make every kernel library of a
        # model fail alike (a warning per library buried the first one).
        self.load_warner.notice(f"entry {server_key} fetched from the cache failed to load ({reason[:200]}); "
                                "reporting it, torch compiles")
        if not server_key or not self.breaker.allow():
            return
        try:
            res = self.client.report(server_key, reason, timeout=min(self.timeout, _REPORT_TIMEOUT))
        except Exception as exc:  # noqa: BLE001 - a failed report never reaches torch
            self.warner.failed(f"report of {server_key[:12]}", exc)
            return
        self.breaker.success()
        with self._lock:
            self._stats.reports += 1
            if res is not None and res.quarantined:
                self._stats.reports_quarantined += 1

    # ---- writes -----------------------------------------------------------------------

    def put(self, full_key: str, value: Any) -> None:
        """Stores torch's value; never raises. With background uploads (the
        default) it only queues the write: compiling goes on at once."""
        if isinstance(value, str):
            value = value.encode("utf-8")
        data = bytes(value)
        cache = _cache_of(full_key)
        if cache == _PGO_CACHE and self._hold_profile(full_key, data):
            return
        if cache == _AUTOTUNE_CACHE:
            self._hold_autotune(full_key, data)
            return
        # After every stored candidate failed its guards here: the next slot.
        self._submit_value(self.slots.write_key(full_key), cache, data)

    def _submit_value(self, full_key: str, cache: str, data: bytes) -> None:
        """Submits torch's value of ``full_key`` with the compile seconds it records."""
        parts = _keys.split_key(full_key)
        name = f"{cache}:{parts[1][:16]}" if parts else full_key[:64]
        # AOTAutograd's time_taken_ms is the sum of its forward and backward
        # graphs' Inductor compile times, which are stored (and counted on
        # their hits, which an AOTAutograd hit always makes) as FX graph
        # entries: sending it again would count those seconds twice.
        secs = 0.0 if cache.startswith("autograd") else time_taken_seconds(data)
        if cache.startswith(_LEASED_CACHE):
            secs = self.fx_graph_seconds(secs)
        self.submit(full_key, self.signature(full_key), cache, data, secs, name)

    _MAX_PROFILES = 64  # PGO keys held at once (one per job id and rank); more are written at once

    def _hold_profile(self, full_key: str, data: bytes) -> bool:
        """Keeps the newest PGO profile of ``full_key`` until :meth:`flush`;
        False when too many are held (then it is written now).

        Dynamo rewrites a job's profile after every frame it compiles: the
        first write holds the first compile's static sizes, later ones the
        dimensions it found dynamic. Entries are immutable (the first write
        wins), so writing each one stored the static profile for good and
        every later process of the job compiled static, then again dynamic."""
        with self._lock:
            if full_key not in self._profiles and len(self._profiles) >= self._MAX_PROFILES:
                return False
            self._profiles[full_key] = data
        return True

    def _hold_autotune(self, full_key: str, data: bytes) -> None:
        """Holds a kernel's autotune record until it has settled (``_autotune``),
        then writes it once; a later save of the kernel replaces it.

        torch saves a kernel's record twice on its first launch: the
        benchmarked winner, then the config coordinate descent tuned from it
        (torch 2.15 marks both ``found_by_coordesc``). Written as they came,
        the first stayed for good (entries are immutable) and the tuned one
        was refused, so every other host launched the untuned config."""
        with self._lock:
            superseded, settled = self._autotune.hold(full_key, data, threading.get_ident(), time.monotonic())
            if superseded:
                self._stats.autotune_superseded += 1
            self._start_settler_locked()
            self._settle_cv.notify_all()
        for key, value in settled:
            self._submit_value(key, _AUTOTUNE_CACHE, value)

    def _start_settler_locked(self) -> None:
        """Starts the settle thread unless it runs (again after a fork)."""
        t = self._settle_thread
        if t is not None and t.is_alive() and self._settle_pid == os.getpid():
            return
        self._settle_pid = os.getpid()
        self._settling = 0
        self._settle_thread = threading.Thread(target=self._settle_loop, name="cachesvc-autotune-settle", daemon=True)
        try:
            self._settle_thread.start()
        except RuntimeError as exc:  # no thread to be had: the records wait for a flush (exit)
            log.debug("cachesvc: no autotune settle thread: %s", exc)

    def _settle_loop(self) -> None:
        """Writes each held autotune record once nothing saved it for the
        quiet period: the last kernel a thread tunes has no successor to
        settle it, and a long job must not keep it until exit."""
        while True:
            with self._lock:
                while True:
                    now = time.monotonic()
                    due = self._autotune.due(now)
                    if due:
                        self._settling += len(due)
                        break
                    nxt = self._autotune.next_due()
                    self._settle_cv.wait(None if nxt is None else max(0.0, nxt - now))
            try:
                for key, value in due:
                    self._submit_value(key, _AUTOTUNE_CACHE, value)
            finally:
                with self._lock:
                    self._settling -= len(due)
                    self._settle_cv.notify_all()

    def _write_autotune(self, timeout: float | None) -> None:
        """Submits every held autotune record, and waits (up to ``timeout``)
        for those the settle thread took, so a flush leaves none behind."""
        end = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            held = self._autotune.drain()
        for key, value in held:
            self._submit_value(key, _AUTOTUNE_CACHE, value)
        with self._lock:
            while self._settling > 0:
                rem = None if end is None else end - time.monotonic()
                if rem is not None and rem <= 0:
                    break
                self._settle_cv.wait(rem)

    def _write_profiles(self) -> None:
        """Submits the PGO profiles held (``_hold_profile``), in their last state."""
        with self._lock:
            held, self._profiles = self._profiles, {}
        for full_key, data in held.items():
            parts = _keys.split_key(full_key)
            name = f"{_PGO_CACHE}:{parts[1][:16]}" if parts else full_key[:64]
            # A profile is no compile: nothing to credit on its hits.
            self.submit(full_key, self.signature(full_key), _PGO_CACHE, data, 0.0, name)

    def cpp_built(self, secs: float) -> None:
        """A C++ build (``_cpp``) compiled for ``secs``; its library is stored
        with those seconds, so the FX graph that waited for it must not count
        them again (``fx_graph_seconds``)."""
        with self._lock:
            self._cpp_unclaimed += max(0.0, secs)

    def fx_graph_seconds(self, secs: float | None) -> float | None:
        """The compile seconds to send with an FX graph entry: torch's
        ``time_taken_ms`` less the C++ builds run since the last FX graph write.

        On CPU an FX graph's ``time_taken_ms`` includes compiling its kernels,
        and each kernel library is also stored (with its build time) by the
        ``cpp`` tier: sending both counted the g++ time twice, so a second
        process claimed about twice the compile time it really skipped.
        Builds run in Inductor's thread pool while the graph's compile waits,
        and graphs compile one after another, so the builds since the last
        write belong to this graph; the sum of what is sent is then the larger
        of the graph's time and its builds' (never both)."""
        with self._lock:
            cpp, self._cpp_unclaimed = self._cpp_unclaimed, 0.0
        if secs is None:
            return None
        return max(0.0, secs - cpp)

    def submit(self, pending_id: str, sig: dict[str, Any], cache: str, data: bytes,
               compile_seconds: float | None, name: str) -> None:
        """Writes ``data`` under ``sig`` (in the background by default); when
        ``compile_seconds`` is None, the time since the miss is sent."""
        written_at = time.monotonic()
        args = (pending_id, sig, cache, data, written_at, compile_seconds, name)
        if self.leasebook is not None:
            self.leasebook.writing(pending_id)
        if self.uploader is None:
            self._write(*args)
        elif not self.uploader.submit(args, len(data)):
            with self._lock:
                self._stats.put_dropped += 1
            log.debug("cachesvc: upload queue full; not writing %s", pending_id)
            if self.leasebook is not None:
                self.leasebook.release(pending_id)

    def _write(self, pending_id: str, sig: dict[str, Any], cache: str, data: bytes, written_at: float,
               secs: float | None, name: str) -> None:
        try:
            if not self.breaker.allow():
                with self._lock:
                    self._stats.skipped += 1
                return
            self._put(pending_id, sig, cache, data, written_at, secs, name)
        except Exception as exc:  # noqa: BLE001 - a failed write never reaches torch
            with self._lock:
                self._stats.put_errors += 1
                self._count(cache, "put_errors")
            self.warner.failed(f"write of {cache} entry", exc, write=True)
        finally:
            if self.leasebook is not None:  # a write that failed: a stored one released it
                self.leasebook.release(pending_id)

    def _put(self, pending_id: str, sig: dict[str, Any], cache: str, data: bytes, written_at: float,
             secs: float | None, name: str) -> None:
        with self._lock:
            known = self._pending.pop(pending_id, None)
        if known is not None:
            server_key, missed_at = known
            if secs is None:
                secs = max(0.0, written_at - missed_at)
        else:
            server_key = self.client.key(sig, timeout=self.timeout, first_byte_timeout=self.lookup_timeout).key
        t0 = time.monotonic()
        try:
            res = self.client.put(server_key, data, compile_seconds=secs, backend=str(sig["backend"]),
                                  name=name, timeout=write_timeout(self.put_timeout, self.timeout, len(data)))
        except Error as exc:
            if exc.status == 409:  # first writer wins; ours differs: fine
                with self._lock:
                    self._stats.put_conflicts += 1
                return
            raise
        finally:
            with self._lock:
                self._stats.put_seconds += time.monotonic() - t0
        self.breaker.success()
        if self.leasebook is not None:
            self.leasebook.written(pending_id)
        with self._lock:
            self._stats.puts += 1
            self._stats.put_bytes += len(data)
            self._stats.compile_seconds_written += secs or 0.0
            self._count(cache, "puts")
            self._count(cache, "put_bytes", len(data))
            if res.created:
                self._stats.put_created += 1
                if _candidates.slot_of(pending_id):
                    self._stats.candidates_written += 1
            else:
                self._stats.put_existing += 1

    def flush(self, timeout: float | None = 60.0) -> bool:
        """Writes the autotune records (``_hold_autotune``) and PGO profiles
        (``_hold_profile``) held, then waits until queued writes are done;
        False if ``timeout`` ran out."""
        end = None if timeout is None else time.monotonic() + timeout
        self._write_autotune(timeout)
        self._write_profiles()
        if self.uploader is None:
            return True
        return self.uploader.flush(None if end is None else max(0.0, end - time.monotonic()))


def backend_class(base: type, service: Service) -> type:
    """A torch ``RemoteCacheBackend`` subclass bound to ``service``; torch
    instantiates it with no arguments (``backend_override_cls()``)."""

    class CachesvcBackend(base):  # type: ignore[misc, valid-type]
        """torch remote-cache backend storing values in a cachesvc server."""

        def __init__(self) -> None:
            super().__init__()
            self.service = service

        def _get(self, key: str) -> bytes | None:
            return service.get(key)

        def _put(self, key: str, data: Any) -> None:
            service.put(key, data)

    CachesvcBackend.__cachesvc__ = True  # type: ignore[attr-defined]
    return CachesvcBackend
