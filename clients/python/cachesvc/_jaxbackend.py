"""The JAX ``CacheInterface`` implementation that :func:`cachesvc.jax.install`
puts in place, and its counters."""

from __future__ import annotations

import collections
import hashlib
import logging
import threading
import time
import zlib
from dataclasses import asdict, dataclass
from typing import Any, Callable

from ._failopen import Breaker, Uploader, Warner, write_timeout
from ._jaxsig import _xla_signature
from ._leasebook import LeaseBook
from .client import Client, Error

# The same logger as cachesvc.jax: one name for everything the JAX backend logs.
log = logging.getLogger("cachesvc.jax")


@dataclass
class CacheStats:
    """Counters of one installed backend (read them with :func:`cachesvc.jax.stats`)."""

    lookups: int = 0
    hits: int = 0
    misses: int = 0
    errors: int = 0
    skipped: int = 0  # calls not made because the circuit breaker was open
    puts: int = 0
    put_created: int = 0
    put_existing: int = 0
    put_conflicts: int = 0
    put_errors: int = 0
    hit_bytes: int = 0
    put_bytes: int = 0
    lookup_seconds: float = 0.0
    put_seconds: float = 0.0
    compile_seconds_saved: float = 0.0  # the compile seconds of the hits (less the wait of a lease wait hit)
    canonical_fallbacks: int = 0  # keys sent as passthrough because the signature failed
    signature_seconds: float = 0.0  # building xla signatures (module text, digests)
    leases_granted: int = 0  # misses this process compiled under a lease
    lease_waits: int = 0  # misses that waited for another holder's compile (or found it written since the miss)
    lease_wait_hits: int = 0  # ... and received its entry
    prefetched: int = 0  # entries loaded by prefetch()
    prefetch_hits: int = 0  # hits served from the prefetched view (no value transfer)
    local_hits: int = 0  # hits served from the local directory tier
    put_dropped: int = 0  # writes not made because the upload queue was full
    load_failures: int = 0  # entries from the server JAX could not load (then a miss)
    reports: int = 0  # ... reported to the server
    reports_quarantined: int = 0  # ... whose report found the entry quarantined


def _compile_seconds_from_value(value: bytes, decompress: Callable[[bytes], bytes] | None) -> float | None:
    """Reads JAX's 4-byte whole-seconds header from inside the compressed value."""
    try:
        head = zlib.decompressobj().decompress(value, 4)
    except zlib.error:
        head = b""
        if decompress is not None:
            try:
                head = decompress(value)[:4]
            except Exception:  # noqa: BLE001 - unknown codec: no header
                head = b""
    if len(head) < 4:
        return None
    return float(int.from_bytes(head[:4], "big"))


def _passthrough_key(plugin: str, kind: str, key: str) -> str:
    """The server's key of a passthrough signature:
    hex(sha256(plugin ‖ 0 ‖ "passthrough" ‖ 0 ‖ kind ‖ 0 ‖ key))."""
    h = hashlib.sha256()
    h.update(plugin.encode() + b"\0passthrough\0" + kind.encode() + b"\0" + key.encode())
    return h.hexdigest()


def _is_writer() -> bool:
    """True in the process JAX lets write cache entries (process 0)."""
    try:
        from jax._src import distributed
        return int(getattr(distributed.global_state, "process_id", 0) or 0) == 0
    except Exception:  # noqa: BLE001
        return True


def _backend_class(base: type) -> type:
    """Builds the backend class on JAX's ``CacheInterface`` (imported lazily)."""

    class CachesvcCache(base):  # type: ignore[misc, valid-type]
        """JAX ``CacheInterface`` storing values in a cachesvc server."""

        _MAX_PENDING = 512  # bounded per-key bookkeeping between key, get and put
        _MAX_SIGNATURE_BYTES = 128 << 20  # module texts kept between key and put
        _MAX_MODULE_BYTES = 32 << 20  # larger modules use JAX's key (passthrough)

        def __init__(self, *, client: Client, mode: str, timeout: float, put_timeout: float | None,
                     lookup_timeout: float | None = None,
                     warn_interval: float, breaker: Breaker,
                     decompress: Callable[[bytes], bytes] | None, leases: bool = False,
                     lease_ttl: float = 30.0, lease_wait: float = 3600.0, local: Any = None) -> None:
            self._path = f"cachesvc:{client.url}/{client.namespace}"
            self.client = client
            self.mode = mode
            self.timeout = timeout
            self.lookup_timeout = lookup_timeout
            self.put_timeout = put_timeout
            self.warn_interval = warn_interval
            self.breaker = breaker
            self.warner = Warner(log, breaker, warn_interval)
            self._decompress = decompress
            self._stats = CacheStats()
            self._lock = threading.Lock()
            # jax key -> signature (canonical mode), server key, miss time
            self._signatures: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
            self._server_keys: collections.OrderedDict[str, tuple[str, float, str]] = collections.OrderedDict()
            # jax key -> server key of values served from the server, until
            # JAX has loaded them (_jaxheal reports those it cannot load)
            self._served: collections.OrderedDict[str, str] = collections.OrderedDict()
            self.leases = leases
            self.leasebook = LeaseBook(client, ttl=lease_ttl, wait=lease_wait, timeout=timeout,
                                       warner=Warner(log, breaker, warn_interval),  # lease waits, apart
                                       count=self._add_one, hung_after=lookup_timeout)
            self._prefetched: dict[str, tuple[bytes, float | None]] = {}  # server key -> value, secs
            self._prefetched_bytes = 0
            self._passthrough_plugin: str | None = None  # verified plugin id for local keys
            self._sig_bytes = 0  # module bytes held in _signatures
            self.local = local  # JAX LRUCache tier in front of the server, or None
            self.uploader: Uploader | None = None  # background writes, or None (synchronous)
            self.flush_at_exit = 60.0

        # ---- bookkeeping -------------------------------------------------------

        def stats(self) -> dict[str, Any]:
            """A snapshot of the counters, plus the breaker state."""
            with self._lock:
                d = asdict(self._stats)
            d["breaker_open"] = not self.breaker.allow()
            d["mode"] = self.mode
            d["run"] = self.client.run
            return d

        def _remember(self, od: collections.OrderedDict, k: str, v: Any) -> None:
            with self._lock:
                od[k] = v
                od.move_to_end(k)
                while len(od) > self._MAX_PENDING:
                    od.popitem(last=False)

        def _warn(self, what: str, exc: BaseException) -> None:
            self.warner.warn(what, exc)

        def _failed(self, what: str, exc: BaseException, *, write: bool = False) -> None:
            self.warner.failed(what, exc, write=write)

        # ---- signatures --------------------------------------------------------

        def _capture(self, jax_key: str, module: Any, devices: Any, compile_options: Any,
                     backend: Any, args: tuple, kwargs: dict) -> None:
            """Called from the wrapped ``cache_key.get``: records the xla signature."""
            t0 = time.monotonic()
            try:
                sig = _xla_signature(module, devices, compile_options, backend, args, kwargs)
            except Exception as exc:  # noqa: BLE001 - never break JAX's key computation
                with self._lock:
                    self._stats.canonical_fallbacks += 1
                log.debug("cachesvc: cannot build xla signature for %s: %s", jax_key, exc)
                return
            finally:
                with self._lock:
                    self._stats.signature_seconds += time.monotonic() - t0
            if len(sig["module"]) > self._MAX_MODULE_BYTES:
                with self._lock:
                    self._stats.canonical_fallbacks += 1
                log.debug("cachesvc: module of %s is %d bytes; using JAX's key", jax_key, len(sig["module"]))
                return
            with self._lock:
                old = self._signatures.pop(jax_key, None)
                if old is not None:
                    self._sig_bytes -= len(old["module"])
                self._signatures[jax_key] = sig
                self._sig_bytes += len(sig["module"])
                while self._sig_bytes > self._MAX_SIGNATURE_BYTES and len(self._signatures) > 1:
                    _, dropped = self._signatures.popitem(last=False)
                    self._sig_bytes -= len(dropped["module"])

        def _signature(self, jax_key: str) -> dict[str, Any]:
            if self.mode == "canonical":
                with self._lock:
                    sig = self._signatures.get(jax_key)
                if sig is not None:
                    return sig
                with self._lock:
                    self._stats.canonical_fallbacks += 1
            return {"backend": "passthrough", "kind": "jax", "key": jax_key}

        # ---- CacheInterface ----------------------------------------------------

        def get(self, key: str) -> bytes | None:
            """Returns the value for JAX's key, or None (a miss, or any failure)."""
            if self.local is not None:
                v = self._local_get(key)
                if v is not None:
                    with self._lock:
                        self._stats.local_hits += 1
                        self._stats.hits += 1
                    return v
            v = self._remote_get(key)
            if v is not None and self.local is not None:
                self._local_put(key, v)
            return v

        def _local_get(self, key: str) -> bytes | None:
            try:
                return self.local.get(key)
            except Exception as exc:  # noqa: BLE001 - a broken local tier is a miss
                log.debug("cachesvc: local get %s: %s", key, exc)
                return None

        def _local_put(self, key: str, value: bytes) -> None:
            try:
                self.local.put(key, value)
            except Exception as exc:  # noqa: BLE001
                log.debug("cachesvc: local put %s: %s", key, exc)

        def _remote_get(self, key: str) -> bytes | None:
            if not self.breaker.allow():
                with self._lock:
                    self._stats.skipped += 1
                return None
            sig = self._signature(key)
            t0 = time.monotonic()
            try:
                value, server_key, secs, used = self._fetch(key, sig)
            except Exception as exc:  # noqa: BLE001 - a failure is a miss
                with self._lock:
                    self._stats.errors += 1
                    self._stats.lookup_seconds += time.monotonic() - t0
                self._failed(f"lookup of {key.split('-')[0]}", exc)
                return None
            self.breaker.success()
            now = time.monotonic()
            with self._lock:
                self._stats.lookups += 1
                self._stats.lookup_seconds += now - t0
            if value is None:
                with self._lock:
                    self._stats.misses += 1
                if server_key:
                    self._remember(self._server_keys, key, (server_key, now, used))
                return None
            with self._lock:
                self._stats.hits += 1
                self._stats.hit_bytes += len(value)
                self._stats.compile_seconds_saved += secs or 0.0
            if server_key:
                self._remember(self._served, key, server_key)
            return value

        def _fetch(self, key: str, sig: dict[str, Any]) -> tuple[bytes | None, str, float | None, str]:
            """(value or None, server key or "", compile seconds, signature
            backend used) for one get."""
            if self._prefetched:
                skey = self._local_key(sig) or self.client.key(
                    sig, timeout=self.timeout, first_byte_timeout=self.lookup_timeout).key
                with self._lock:
                    got = self._prefetched.get(skey)
                    if got is not None:
                        self._stats.prefetch_hits += 1
                if got is not None:
                    return got[0], skey, got[1], str(sig["backend"])
            try:
                res = self.client.lookup_result(sig, timeout=self.timeout, first_byte_timeout=self.lookup_timeout)
            except Error as exc:
                if sig.get("backend") != "xla" or not 400 <= exc.status < 500 or exc.status in (401, 403, 429):
                    raise
                # The server refused the xla signature (too large, a module it
                # cannot parse ...): cache this program under JAX's own key.
                log.debug("cachesvc: xla signature of %s refused (%s); using JAX's key", key, exc)
                with self._lock:
                    dropped = self._signatures.pop(key, None)
                    if dropped is not None:
                        self._sig_bytes -= len(dropped["module"])
                    self._stats.canonical_fallbacks += 1
                sig = {"backend": "passthrough", "kind": "jax", "key": key}
                res = self.client.lookup_result(sig, timeout=self.timeout, first_byte_timeout=self.lookup_timeout)
            used = str(sig["backend"])
            if res.value is not None:
                return res.value, res.key, res.compile_seconds, used
            if self.leases and res.key:
                # A hit after waiting on another process's lease saved its
                # compile time less the wait, as the server counts it.
                v, saved = self.leasebook.miss_saved(key, res.key, key.split("-")[0], may_hold=_is_writer())
                return v, res.key, saved, used
            return None, res.key, None, used

        def _local_key(self, sig: dict[str, Any]) -> str | None:
            plugin = self._passthrough_plugin
            if plugin and sig.get("backend") == "passthrough":
                return _passthrough_key(plugin, str(sig["kind"]), str(sig["key"]))
            return None

        def _add_one(self, counter: str) -> None:
            with self._lock:
                setattr(self._stats, counter, getattr(self._stats, counter) + 1)

        def release_leases(self) -> None:
            """Releases every lease this backend still holds (best effort)."""
            self.leasebook.release_all()

        def prefetch(self, run: str, *, max_bytes: int, timeout: float) -> int:
            """See :func:`cachesvc.jax.prefetch`."""
            if not self.breaker.allow():
                raise Error(0, "breaker_open", "the server failed recently (circuit breaker open)")
            m = self.client.manifest(run, timeout=timeout, first_byte_timeout=self.lookup_timeout)
            keys = [str(e["key"]) for e in m.get("keys") or [] if e.get("key")]
            if self.mode == "jax-key" and self._passthrough_plugin is None:
                probe = {"backend": "passthrough", "kind": "jax", "key": "jit_probe-0"}
                kr = self.client.key(probe, timeout=self.timeout)
                if kr.plugin and _passthrough_key(kr.plugin, "jax", probe["key"]) == kr.key:
                    self._passthrough_plugin = kr.plugin
            loaded = 0

            def keep(member: Any, f: Any) -> None:
                nonlocal loaded
                if self._prefetched_bytes + member.size > max_bytes:
                    return
                v = f.read()
                with self._lock:
                    if member.key not in self._prefetched:
                        self._prefetched[member.key] = (v, member.compile_seconds)
                        self._prefetched_bytes += len(v)
                        self._stats.prefetched += 1
                        loaded += 1

            if keys:
                self.client.batch(keys, keep, timeout=timeout)
            return loaded

        def compile_ended(self, key: str) -> None:
            """Called when JAX's compile-and-write step for ``key`` returned or
            raised (``_jaxlease``): see :meth:`LeaseBook.compile_ended`."""
            self.leasebook.compile_ended(key)

        def put(self, key: str, value: bytes) -> None:
            """Stores JAX's value; never raises. With background uploads (the
            default) it only queues the write: training goes on at once."""
            written_at = time.monotonic()
            self.leasebook.writing(key)
            if self.local is not None:
                self._local_put(key, value)
            if self.uploader is None:
                self._write(key, value, written_at)
            elif not self.uploader.submit((key, value, written_at), len(value)):
                with self._lock:
                    self._stats.put_dropped += 1
                log.debug("cachesvc: upload queue full; not writing %s", key)
                self.leasebook.release(key)

        def _write(self, key: str, value: bytes, written_at: float) -> None:
            try:
                self._put(key, value, written_at)
            except Exception as exc:  # noqa: BLE001 - a failed write never reaches JAX
                with self._lock:
                    self._stats.put_errors += 1
                self._failed(f"write of {key.split('-')[0]}", exc, write=True)
            finally:
                self.leasebook.release(key)  # if the write failed: a successful PUT released it

        def flush(self, timeout: float | None = 60.0) -> bool:
            """Waits until queued uploads are done; False if ``timeout`` ran out."""
            return True if self.uploader is None else self.uploader.flush(timeout)

        def _put(self, key: str, value: bytes, written_at: float) -> None:
            if not self.breaker.allow():
                with self._lock:
                    self._stats.skipped += 1
                return
            with self._lock:
                known = self._server_keys.pop(key, None)
                sig = self._signatures.pop(key, None) if self.mode == "canonical" else None
                if sig is not None:
                    self._sig_bytes -= len(sig["module"])
            compile_seconds: float | None = None
            if known is not None:
                server_key, missed_at, backend = known
                compile_seconds = max(0.0, written_at - missed_at)
            else:
                if sig is None:
                    sig = self._signature(key)
                backend = str(sig["backend"])
                server_key = self.client.key(sig, timeout=self.timeout, first_byte_timeout=self.lookup_timeout).key
            if compile_seconds is None:
                compile_seconds = _compile_seconds_from_value(value, self._decompress)
            # Under passthrough the name is the whole JAX key: `cachesvc warm`
            # names files "<name>-cache" from it (the server key is a hash and
            # cannot give the JAX key back).
            if backend == "passthrough" and len(key) <= 256:  # the header's limit
                name = key
            else:
                name = key.rsplit("-", 1)[0] if "-" in key else key
            t0 = time.monotonic()
            try:
                res = self.client.put(
                    server_key, value,
                    compile_seconds=compile_seconds,
                    backend=backend,
                    name=name,
                    timeout=write_timeout(self.put_timeout, self.timeout, len(value)),
                )
            except Error as exc:
                if exc.status == 409:  # first writer wins; ours differs: fine
                    with self._lock:
                        self._stats.put_conflicts += 1
                    log.debug("cachesvc: %s already stored with other bytes", name)
                    return
                raise
            finally:
                with self._lock:
                    self._stats.put_seconds += time.monotonic() - t0
            self.breaker.success()
            self.leasebook.written(key)
            with self._lock:
                self._stats.puts += 1
                self._stats.put_bytes += len(value)
                if res.created:
                    self._stats.put_created += 1
                else:
                    self._stats.put_existing += 1

    return CachesvcCache
