"""A JAX persistent-compilation-cache backend that stores executables in cachesvc.

One line at the top of a training script::

    import cachesvc.jax; cachesvc.jax.install("http://cache:8080")

or, with no code change beyond the import, from the environment
(``CACHESVC_URL``, ``CACHESVC_NAMESPACE``, ``CACHESVC_TOKEN``, ``CACHESVC_RUN``,
``CACHESVC_MODE``, ``CACHESVC_LEASES``)::

    import cachesvc.jax; cachesvc.jax.install()

How it hooks in (JAX has no official backend API; coded against jax 0.10.2):

* ``jax._src.compilation_cache.reset_cache()`` then ``compilation_cache._cache =
  <our CacheInterface>``, exactly as JAX's own tests do. JAX then calls our
  ``get(key)`` before every XLA compile and ``put(key, value)`` after it.
  ``jax_compilation_cache_dir`` is *not* needed: JAX only consults it to build
  its own file cache when ``_cache`` is None.
* ``mode="canonical"`` (default) also wraps ``jax._src.cache_key.get``: while JAX
  computes its own key we capture the module text without debug info and the
  other key components, and ask the server's ``xla`` plugin for the key. The
  same computation under another function name, as a lambda or on other source
  lines then shares one entry.
* ``mode="jax-key"`` keeps JAX's own key and stores the value under it through
  the server's ``passthrough`` backend (kind ``"jax"``).

What is saved: XLA compilation only. Tracing and lowering to StableHLO still
run on a hit (the key is computed from the lowered module).

Writes: ``put`` queues the entry for a background uploader thread (bounded in
bytes; flushed at exit and by :func:`flush`), so training continues at once.

Fault tolerance: a server that is down, slow or failing behaves as a miss. One
warning is logged (then at most one per ``warn_interval`` seconds); a failed
write never raises into JAX; every call has a time budget; after
``breaker_threshold`` consecutive failures the backend stops calling the
server for ``breaker_cooldown`` seconds (a circuit breaker), so training is not
slowed by repeated timeouts.

Self-healing: when JAX cannot load an executable the server sent (its
deserializer raises), the entry is reported to the server with the error
(``POST .../reports``) and treated as a miss, so JAX compiles; the server
quarantines an entry once enough distinct clients reported it
(``_jaxheal.py``).

Compile seconds: JAX stores the compile time as a 4-byte big-endian count of
*whole* seconds at the start of the *compressed* value, which is 0 for most
programs. We measure instead the time from the miss (our ``get``) to the write
(our ``put``), which spans XLA compilation plus serialization, and send that as
``X-Compile-Seconds``; when no miss was observed we decompress the header
(zlib, or JAX's own codec) and send its whole seconds.
"""

from __future__ import annotations

import atexit
import collections
import hashlib
import logging
import os
import socket
import sys
import threading
import time
import zlib
from dataclasses import asdict, dataclass
from typing import Any, Callable

from . import _jaxheal
from ._failopen import Breaker, Settings, Uploader, Warner, env, env_flag
from .client import Client, Error

__all__ = ["install", "uninstall", "installed", "stats", "flush", "prefetch", "CacheStats"]

log = logging.getLogger("cachesvc.jax")

MODES = ("canonical", "jax-key")

_lock = threading.Lock()
_installed: Any = None  # the installed backend (a CacheInterface subclass instance)
_orig_cache_key_get: Callable[..., str] | None = None
_atexit_registered = False


def _release_at_exit() -> None:
    b = _installed
    if b is not None:
        if not b.flush(b.flush_at_exit):
            if not b.breaker.allow():  # the failure was warned about already
                log.debug("cachesvc: exiting without the queued uploads (circuit breaker open)")
            else:
                log.warning("cachesvc: exiting with uploads still queued (flush_at_exit=%.0fs)", b.flush_at_exit)
        if b.breaker.allow():  # else the leases expire by themselves
            b.release_leases()


@dataclass
class CacheStats:
    """Counters of one installed backend (read them with :func:`stats`)."""

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
    compile_seconds_saved: float = 0.0
    canonical_fallbacks: int = 0  # keys sent as passthrough because the signature failed
    signature_seconds: float = 0.0  # building xla signatures (module text, digests)
    leases_granted: int = 0  # misses this process compiled under a lease
    lease_waits: int = 0  # misses that waited for another holder's compile
    lease_wait_hits: int = 0  # ... and received its entry
    prefetched: int = 0  # entries loaded by prefetch()
    prefetch_hits: int = 0  # hits served from the prefetched view (no value transfer)
    local_hits: int = 0  # hits served from the local directory tier
    put_dropped: int = 0  # writes not made because the upload queue was full
    load_failures: int = 0  # entries from the server JAX could not load (then a miss)
    reports: int = 0  # ... reported to the server
    reports_quarantined: int = 0  # ... whose report found the entry quarantined


def _xla_flags(extra_prefixes: list[str], excluded: list[str]) -> list[str]:
    """The XLA flags JAX hashes into its key (same sources, same exclusions)."""
    flags: list[str] = []
    for var in ("XLA_FLAGS", "LIBTPU_INIT_ARGS"):
        v = os.getenv(var)
        if v:
            flags.extend(v.split())
    for arg in sys.argv:
        if arg.startswith("--xla") or any(arg.startswith(p) for p in extra_prefixes):
            flags.append(arg)
    return sorted(f for f in flags if f.split("=")[0] not in excluded)


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


def install(
    url: str | None = None,
    namespace: str | None = None,
    token: str | None = None,
    mode: str | None = None,
    *,
    run: str | None = None,
    min_compile_time_secs: float = 0.0,
    min_entry_size_bytes: int = -1,
    timeout: float = 10.0,
    lookup_timeout: float | None = None,
    put_timeout: float | None = None,
    retries: int = 2,
    warn_interval: float = 60.0,
    breaker_threshold: int = 3,
    breaker_cooldown: float = 30.0,
    leases: bool | None = None,
    lease_ttl: float = 120.0,
    lease_wait: float = 60.0,
    local_dir: str | None = None,
    background_uploads: bool = True,
    upload_queue_bytes: int = 1 << 30,
    flush_at_exit: float = 60.0,
    client: Client | None = None,
    verify_key: str | None = None,
) -> Any:
    """Installs cachesvc as JAX's persistent compilation cache.

    Args:
        url: the server URL; default ``$CACHESVC_URL``. With neither, a warning
            is logged and nothing is installed (returns None).
        namespace: default ``$CACHESVC_NAMESPACE`` or ``"default"``.
        token: bearer token; default ``$CACHESVC_TOKEN``, else the first
            line of the file ``$CACHESVC_TOKEN_FILE``.
        verify_key: Ed25519 public key (base64) that every entry handed to
            JAX must be signed with; default ``$CACHESVC_VERIFY_KEY``.
        mode: ``"canonical"`` (server-side canonical keys through the ``xla``
            plugin) or ``"jax-key"`` (JAX's key through ``passthrough``);
            default ``$CACHESVC_MODE`` or ``"canonical"``.
        run: the run id sent with every request (``X-Cachesvc-Run``) so the
            server records this run's manifest; default ``$CACHESVC_RUN`` or
            ``<host>-<pid>-<random>``.
        min_compile_time_secs: sets ``jax_persistent_cache_min_compile_time_secs``
            (JAX's default 1.0 s means small programs are never written).
        min_entry_size_bytes: sets ``jax_persistent_cache_min_entry_size_bytes``
            (-1: no size limit).
        timeout: time budget in seconds of one lookup, retries included
            (streaming a large hit included).
        lookup_timeout: how long a lookup waits to connect and receive the
            server's response headers (not retried; a timeout opens the
            breaker at once), so a hung server costs about this once; default
            ``$CACHESVC_LOOKUP_TIMEOUT`` or 1 s; 0: only ``timeout`` applies.
        put_timeout: time budget of one write; default ``timeout`` plus one
            second per 20 MB of value.
        retries: retries after a connection error or a 503, within the budget.
        warn_interval: at most one warning per this many seconds.
        breaker_threshold: consecutive failures that open the circuit breaker
            (a timeout opens it at once).
        breaker_cooldown: seconds the breaker stays open.
        leases: on a miss, take the server's compile lease before compiling,
            so that only one process in a fleet compiles a program while the
            others wait for its entry (default ``$CACHESVC_LEASES`` or off).
            Only a process that writes (JAX process 0) takes leases; the others
            only wait. A holder that never writes (a program with host
            callbacks, which JAX does not cache, or one under a raised
            ``min_compile_time_secs``) delays waiters until ``lease_ttl`` or
            ``lease_wait`` runs out.
        lease_ttl: seconds a lease lasts (longer compiles: raise it).
        lease_wait: how long a miss waits for another holder's entry before
            compiling itself.
        local_dir: a local directory tier in front of the server, in JAX's
            own ``LRUCache`` layout and keyed by JAX's key: checked first (even
            while the server is down), filled on remote hits and on writes.
            Default: ``jax_compilation_cache_dir`` when it is set, so that
            installing cachesvc never disables an existing local cache.
        background_uploads: write entries from a background thread, so a
            compile returns to training at once; at most ``upload_queue_bytes``
            wait (further writes are dropped, counted as ``put_dropped``), and
            at exit the process waits up to ``flush_at_exit`` seconds for them
            (:func:`flush` waits explicitly); neither waits while the breaker
            is open (the server timed out or keeps failing).
        client: use this :class:`cachesvc.Client` instead of building one.

    Returns:
        The installed backend (its ``stats()`` method returns the counters),
        or None when nothing could be installed (no URL, or this JAX version
        lacks the hooks; a warning says which).
    """
    global _installed, _orig_cache_key_get
    settings = Settings.resolve(url, namespace, token, run, verify_key, lookup_timeout)
    run = settings.run
    mode = mode or env("CACHESVC_MODE", "canonical")
    if leases is None:
        leases = env_flag("CACHESVC_LEASES")
    if mode not in MODES:
        raise ValueError(f"cachesvc.jax.install: mode must be one of {MODES}, got {mode!r}")
    if client is None and not settings.url:
        log.warning("cachesvc: no server URL (pass url= or set CACHESVC_URL); "
                    "the shared compile cache is not installed")
        return None

    try:
        import jax
        from jax._src import cache_key as ck
        from jax._src import compilation_cache as cc
        from jax._src.compilation_cache_interface import CacheInterface
    except Exception as exc:  # noqa: BLE001 - any import trouble: do nothing
        log.warning("cachesvc: cannot import JAX's compilation cache internals (%s: %s); "
                    "the shared compile cache is not installed", type(exc).__name__, exc)
        return None
    missing = [n for n in ("reset_cache", "_cache") if not hasattr(cc, n)]
    if missing:
        log.warning("cachesvc: this JAX version (%s) lacks compilation_cache.%s; "
                    "the shared compile cache is not installed", jax.__version__, ", ".join(missing))
        return None
    if mode == "canonical" and not callable(getattr(ck, "get", None)):
        log.warning("cachesvc: this JAX version (%s) lacks cache_key.get; using mode 'jax-key'",
                    jax.__version__)
        mode = "jax-key"

    if client is None:
        client = settings.client(timeout=timeout, retries=retries)
    elif client.run is None:
        client.run = run

    if local_dir is None:
        local_dir = getattr(jax.config, "jax_compilation_cache_dir", None) or None
    local = None
    if local_dir:
        try:
            from jax._src.lru_cache import LRUCache
            max_size = int(getattr(jax.config, "jax_compilation_cache_max_size", -1))
            local = LRUCache(str(local_dir), max_size=max_size)
        except Exception as exc:  # noqa: BLE001 - the remote tier still works
            log.warning("cachesvc: local cache dir %s unusable (%s: %s); using the server only",
                        local_dir, type(exc).__name__, exc)

    backend_cls = _backend_class(CacheInterface)
    backend = backend_cls(
        client=client,
        mode=mode,
        timeout=timeout,
        lookup_timeout=settings.lookup_timeout,
        put_timeout=put_timeout,
        warn_interval=warn_interval,
        breaker=Breaker(breaker_threshold, breaker_cooldown),
        decompress=getattr(cc, "decompress_executable", None),
        leases=bool(leases),
        lease_ttl=lease_ttl,
        lease_wait=lease_wait,
        local=local,
    )
    if background_uploads:
        backend.uploader = Uploader(backend._write, max_items=1024, max_bytes=upload_queue_bytes,
                                    give_up=lambda: not backend.breaker.allow())
    backend.flush_at_exit = flush_at_exit

    with _lock:
        _uninstall_locked()
        jax.config.update("jax_enable_compilation_cache", True)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_secs))
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", int(min_entry_size_bytes))
        cc.reset_cache()
        cc._cache = backend
        _jaxheal.install(cc, installed)
        if mode == "canonical":
            orig = ck.get
            _orig_cache_key_get = orig

            def get_with_signature(module, devices, compile_options, backend_, *args: Any, **kwargs: Any) -> str:
                key = orig(module, devices, compile_options, backend_, *args, **kwargs)
                backend._capture(key, module, devices, compile_options, backend_, args, kwargs)
                return key

            get_with_signature.__wrapped__ = orig  # type: ignore[attr-defined]
            get_with_signature.__cachesvc__ = True  # type: ignore[attr-defined]
            ck.get = get_with_signature  # type: ignore[assignment]
        _installed = backend
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_release_at_exit)
        _atexit_registered = True
    log.info("cachesvc: JAX compilation cache -> %s namespace=%s mode=%s run=%s leases=%s",
             client.url, client.namespace, mode, run, bool(leases))
    return backend


def _uninstall_locked() -> None:
    global _installed, _orig_cache_key_get
    if _installed is None:
        return
    from jax._src import cache_key as ck
    from jax._src import compilation_cache as cc
    if _orig_cache_key_get is not None and getattr(ck.get, "__cachesvc__", False):
        ck.get = _orig_cache_key_get
    _orig_cache_key_get = None
    _jaxheal.uninstall(cc)
    if cc._cache is _installed:
        cc.reset_cache()
    _installed.flush(_installed.flush_at_exit)
    _installed.release_leases()
    _installed = None


def uninstall() -> None:
    """Removes the backend and restores JAX's key function (no-op if not installed)."""
    with _lock:
        _uninstall_locked()


def installed() -> Any:
    """The installed backend, or None."""
    return _installed


def stats() -> dict[str, Any]:
    """The installed backend's counters as a dict (empty if not installed)."""
    b = _installed
    return b.stats() if b is not None else {}


def flush(timeout: float | None = 60.0) -> bool:
    """Waits until the installed backend's queued uploads are written (or
    failed); False if ``timeout`` ran out. True when nothing is installed."""
    b = _installed
    return True if b is None else b.flush(timeout)


def prefetch(run: str, *, max_bytes: int = 2 << 30, timeout: float = 300.0) -> int:
    """Warms the installed backend's in-process view from a run's manifest.

    Fetches every key the run wrote or looked up (``GET runs/{run}/manifest``)
    with one streamed batch request and keeps the values in memory (at most
    ``max_bytes``), so later lookups of those entries need no value transfer:
    in ``jax-key`` mode no request at all (the passthrough key is computed
    locally once verified against the server), in ``canonical`` mode one small
    ``POST /keys``. Returns the number of entries loaded; 0 (with a warning)
    if nothing is installed or the server fails.
    """
    b = _installed
    if b is None:
        log.warning("cachesvc: prefetch(%r) without install(): nothing to warm", run)
        return 0
    try:
        return b.prefetch(run, max_bytes=max_bytes, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - warming is best effort
        b._warn(f"prefetch of run {run!r}", exc)
        return 0


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
                     lease_ttl: float = 120.0, lease_wait: float = 60.0, local: Any = None) -> None:
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
            self.lease_ttl = lease_ttl
            self.lease_wait = lease_wait
            self.holder = f"{socket.gethostname()}:{os.getpid()}"
            self._held: dict[str, Any] = {}  # jax key -> cachesvc.Lease we hold
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

        def _failed(self, what: str, exc: BaseException) -> None:
            self.warner.failed(what, exc)

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
                return self._lease_or_wait(key, res.key), res.key, None, used
            return None, res.key, None, used

        def _local_key(self, sig: dict[str, Any]) -> str | None:
            plugin = self._passthrough_plugin
            if plugin and sig.get("backend") == "passthrough":
                return _passthrough_key(plugin, str(sig["kind"]), str(sig["key"]))
            return None

        def _lease_or_wait(self, key: str, skey: str) -> bytes | None:
            """On a miss: take the compile lease (None: we compile) or wait for
            the holder's entry (bytes, or None when it never came)."""
            if _is_writer():
                lease = self.client.lease(skey, holder=self.holder, ttl=self.lease_ttl, renew=False)
                try:
                    granted = lease.acquire()
                except Error as exc:
                    if exc.status == 0:
                        raise
                    # e.g. 503 lease_table_full: compile without a lease.
                    log.debug("cachesvc: no lease on %s: %s", skey, exc)
                    return None
                if granted:
                    with self._lock:
                        self._held[key] = lease
                        self._stats.leases_granted += 1
                    return None
                if lease.code == "entry_exists":  # written since our lookup
                    return self.client.get(skey, timeout=self.timeout)
            with self._lock:
                self._stats.lease_waits += 1
            try:
                v = self.client.get(skey, wait=self.lease_wait, timeout=self.timeout)
            except Error as exc:
                if exc.status == 503:  # too many waiters: compile ourselves
                    return None
                raise
            if v is not None:
                with self._lock:
                    self._stats.lease_wait_hits += 1
            return v

        def release_leases(self) -> None:
            """Releases every lease this backend still holds (best effort)."""
            with self._lock:
                held, self._held = self._held, {}
            for lease in held.values():
                try:
                    lease.release()
                except Exception:  # noqa: BLE001 - it expires by itself
                    pass

        def prefetch(self, run: str, *, max_bytes: int, timeout: float) -> int:
            """See :func:`cachesvc.jax.prefetch`."""
            m = self.client.manifest(run, timeout=timeout)
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

        def put(self, key: str, value: bytes) -> None:
            """Stores JAX's value; never raises. With background uploads (the
            default) it only queues the write: training goes on at once."""
            written_at = time.monotonic()
            if self.local is not None:
                self._local_put(key, value)
            if self.uploader is None:
                self._write(key, value, written_at)
            elif not self.uploader.submit((key, value, written_at), len(value)):
                with self._lock:
                    self._stats.put_dropped += 1
                log.debug("cachesvc: upload queue full; not writing %s", key)
                self._release_lease(key)

        def _write(self, key: str, value: bytes, written_at: float) -> None:
            try:
                self._put(key, value, written_at)
            except Exception as exc:  # noqa: BLE001 - a failed write never reaches JAX
                with self._lock:
                    self._stats.put_errors += 1
                self._failed(f"write of {key.split('-')[0]}", exc)
            finally:
                self._release_lease(key)

        def _release_lease(self, key: str) -> None:
            with self._lock:
                lease = self._held.pop(key, None)
            if lease is not None:  # a successful PUT released it already
                try:
                    lease.release()
                except Exception:  # noqa: BLE001 - it expires by itself
                    pass

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
                    timeout=self.put_timeout if self.put_timeout is not None
                    else self.timeout + len(value) / 20e6,
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
            with self._lock:
                lease = self._held.pop(key, None)
                if lease is not None:
                    lease.granted = False  # the PUT released it on the server
                self._stats.puts += 1
                self._stats.put_bytes += len(value)
                if res.created:
                    self._stats.put_created += 1
                else:
                    self._stats.put_existing += 1

    return CachesvcCache


def _xla_signature(module: Any, devices: Any, compile_options: Any, backend: Any,
                   args: tuple, kwargs: dict) -> dict[str, Any]:
    """The ``xla`` plugin signature of one compile, from cache_key.get's arguments.

    Mirrors what JAX hashes into its own key (jax 0.10.2 ``cache_key.get``),
    but sends the module as text without debug info so that the server can
    canonicalize names away.
    """
    from jax._src import cache_key as ck
    from jax._src import config as jcfg
    from jax._src.lib import version_str as jaxlib_version

    compression = args[0] if args else kwargs.get("compression_algorithm", "zstandard")
    ignore_callbacks = args[1] if len(args) > 1 else kwargs.get("ignore_callbacks")

    with module.context:
        m = module
        no = getattr(getattr(ck, "IgnoreCallbacks", None), "NO", None)
        if ignore_callbacks is not None and ignore_callbacks != no and hasattr(ck, "_remove_callbacks"):
            m = ck._remove_callbacks(module.operation.clone(), ignore_callbacks)
        meta_flag = getattr(jcfg, "compilation_cache_include_metadata_in_key", None)
        include_meta = bool(meta_flag.value) if meta_flag is not None else False
        text = m.operation.get_asm(enable_debug_info=include_meta)

    # JAX points XLA's own caches (autotune results, GPU kernels) into
    # jax_compilation_cache_dir, so its key depends on that directory's path.
    # The path does not change the executable: clear it, so hosts with
    # different cache directories share keys.
    compile_options = _without_cache_paths(compile_options)
    opts = hashlib.sha256()
    if hasattr(ck, "_hash_serialized_compile_options"):
        ck._hash_serialized_compile_options(opts, compile_options,
                                            strip_device_assignment=(backend.platform == "gpu"))
    else:
        opts.update(compile_options.SerializeAsString())

    topo = hashlib.sha256()
    if hasattr(ck, "_hash_accelerator_config"):
        ck._hash_accelerator_config(topo, devices)
    else:
        for d in devices.flat:
            topo.update(d.device_kind.encode())
    kinds = sorted({str(d.device_kind) for d in devices.flat})

    excluded = list(getattr(ck, "xla_flags_to_exclude_from_cache_key", []))
    prefixes = list(ck.get_flag_prefixes()) if hasattr(ck, "get_flag_prefixes") else []
    extra: dict[str, str] = {}
    hook = ck.custom_hook() if hasattr(ck, "custom_hook") else ""
    if hook:
        extra["custom_hook"] = hook
    return {
        "backend": "xla",
        "module": text,
        "module_format": "stablehlo",
        "platform": str(backend.platform),
        "platform_version": str(backend.platform_version),
        "jaxlib_version": str(jaxlib_version),
        "xla_flags": _xla_flags(prefixes, excluded),
        "compile_options": opts.hexdigest(),
        "topology": f"{topo.hexdigest()} devices={devices.size} kinds={','.join(kinds)}",
        "codec": str(compression),
        "extra": extra,
        **({"jaxlib_build": build} if (build := _jaxlib_build()) else {}),
    }


# Names of the shared library that holds jaxlib's code when the extension
# module itself is a shim (jaxlib 0.10: _jax.so is 3.5 KB, libjax_common.so
# 350 MB beside it).
_JAXLIB_COMMON = ("libjax_common.so", "libjax_common.dylib", "jax_common.dll")


def _jaxlib_extension_files() -> list[str]:
    """The files of the loaded XLA extension: ``jaxlib._jax`` (``jaxlib.xla_extension``
    in older jaxlib) and the library beside it that holds its code; [] if not loaded."""
    for name in ("jaxlib._jax", "jaxlib.xla_extension"):
        path = getattr(sys.modules.get(name), "__file__", None)
        if path:
            break
    else:
        return []
    files = [os.path.realpath(path)]
    for lib in _JAXLIB_COMMON:
        p = os.path.join(os.path.dirname(path), lib)
        if os.path.isfile(p):
            files.append(os.path.realpath(p))
    return files


_build_lock = threading.Lock()
_build_memo: tuple[tuple, str] | None = None  # ((path, size, mtime_ns) per file, digest)


def _jaxlib_build() -> str:
    """SHA-256 (hex) of the loaded XLA extension's files, the signature's
    ``jaxlib_build``: two jaxlib builds with one version string then never share
    an executable (JAX issue #18750). Read once per process (streamed) and kept
    while every file's path, size and mtime stay the same; "" (no field) when
    the files cannot be found or read."""
    global _build_memo
    try:
        files = _jaxlib_extension_files()
        if not files:
            return ""
        stamp = tuple((p, st.st_size, st.st_mtime_ns) for p in files for st in (os.stat(p),))
        with _build_lock:
            if _build_memo is not None and _build_memo[0] == stamp:
                return _build_memo[1]
            h = hashlib.sha256()
            for p, size, _ in stamp:
                h.update(f"{os.path.basename(p)}\0{size}\0".encode())
                with open(p, "rb") as f:
                    while chunk := f.read(1 << 20):
                        h.update(chunk)
            _build_memo = (stamp, h.hexdigest())
            return _build_memo[1]
    except Exception as exc:  # noqa: BLE001 - fail open: the key just lacks the field
        log.debug("cachesvc: cannot fingerprint the jaxlib build: %s", exc)
        return ""


_CACHE_PATH_OPTIONS = ("xla_gpu_per_fusion_autotune_cache_dir", "xla_gpu_kernel_cache_file")


def _without_cache_paths(compile_options: Any) -> Any:
    """A copy of ``compile_options`` with XLA's cache-file paths cleared (the
    original goes to the compiler untouched); the original if none is set."""
    try:
        dbg = compile_options.executable_build_options.debug_options
        if not any(getattr(dbg, name, "") for name in _CACHE_PATH_OPTIONS):
            return compile_options
        import copy
        c = copy.deepcopy(compile_options)
        dbg = c.executable_build_options.debug_options
        for name in _CACHE_PATH_OPTIONS:
            if getattr(dbg, name, ""):
                setattr(dbg, name, "")
        return c
    except Exception:  # noqa: BLE001 - unknown options object: hash it as is
        return compile_options
