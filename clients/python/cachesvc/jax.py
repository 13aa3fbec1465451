"""A JAX persistent-compilation-cache backend that stores executables in cachesvc.

One line at the top of a training script::

    import cachesvc.jax; cachesvc.jax.install("http://cache:8080")

or, with no code change beyond the import, from the environment
(``CACHESVC_URL``, ``CACHESVC_NAMESPACE``, ``CACHESVC_TOKEN``, ``CACHESVC_TOKEN_FILE``,
``CACHESVC_VERIFY_KEY``, ``CACHESVC_CLIENT_CERT``, ``CACHESVC_CLIENT_KEY``, ``CACHESVC_RUN``,
``CACHESVC_MODE``, ``CACHESVC_LEASES``, ``CACHESVC_LOOKUP_TIMEOUT``)::

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
SIGTERM (a scheduler stopping the job) kills Python without running exit
handlers: when SIGTERM has no handler, install sets one that flushes for at
most 5 s, releases the leases, then dies by SIGTERM as before (``_sigterm.py``).

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
import logging
import sys
import threading
from typing import Any, Callable

from . import _jaxheal, _jaxlease, _sigterm
from ._failopen import Breaker, Settings, Uploader, env, env_flag
# CacheStats is re-exported: it is part of cachesvc.jax's API.
from ._jaxbackend import CacheStats, _backend_class
from .client import Client, Error

__all__ = ["install", "uninstall", "installed", "stats", "summary", "flush", "prefetch", "CacheStats"]

log = logging.getLogger("cachesvc.jax")

# CacheStats keeps cachesvc.jax as its module, as before the split: pickles
# and the class's repr name its public home, not a private module.
CacheStats.__module__ = __name__

MODES = ("canonical", "jax-key")

_lock = threading.Lock()
_installed: Any = None  # the installed backend (a CacheInterface subclass instance)
_orig_cache_key_get: Callable[..., str] | None = None
_atexit_registered = False


def _release_at_exit(timeout: float | None = None) -> None:
    """At exit (and on SIGTERM, within ``timeout``): writes the queued
    uploads, then releases the leases still held."""
    b = _installed
    if b is not None:
        limit = b.flush_at_exit if timeout is None else min(timeout, b.flush_at_exit)
        if not b.flush(limit):
            if not b.breaker.allow():  # the failure was warned about already
                log.debug("cachesvc: exiting without the queued uploads (circuit breaker open)")
            else:
                log.warning("cachesvc: exiting with uploads still queued (waited %.0fs)", limit)
        if b.breaker.allow():  # else the leases expire by themselves
            b.release_leases()


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
    lease_ttl: float = 30.0,
    lease_wait: float = 3600.0,
    local_dir: str | None = None,
    background_uploads: bool = True,
    upload_queue_bytes: int = 1 << 30,
    flush_at_exit: float = 60.0,
    client: Client | None = None,
    verify_key: str | list[str] | None = None,
) -> Any:
    """Installs cachesvc as JAX's persistent compilation cache.

    Args:
        url: the server URL; default ``$CACHESVC_URL``. With neither, a warning
            is logged and nothing is installed (returns None).
        namespace: default ``$CACHESVC_NAMESPACE`` or ``"default"``.
        token: bearer token; default ``$CACHESVC_TOKEN``, else the first
            line of the file ``$CACHESVC_TOKEN_FILE``.
        verify_key: the Ed25519 public key (base64) every entry handed to
            JAX must be signed with, or several (comma-separated, or a list:
            the old and the new during a key rotation), any of which may
            have signed it; default ``$CACHESVC_VERIFY_KEY``.
        mode: ``"canonical"`` (server-side canonical keys through the ``xla``
            plugin) or ``"jax-key"`` (JAX's key through ``passthrough``);
            default ``$CACHESVC_MODE`` or ``"canonical"``.
        run: the run id sent with every request (``X-Cachesvc-Run``) so the
            server records this run's manifest; default ``$CACHESVC_RUN`` or
            ``<host>-<pid>-<random>`` (``torchrun-<job id>`` under torchrun).
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
            only wait. When JAX writes nothing after the compile (a program
            with host callbacks, which JAX does not cache, one under a raised
            ``min_compile_time_secs``, a compile that raised) the lease is
            released as the compile ends and waiters compile themselves.
        lease_ttl: seconds a lease lasts unless renewed; it is renewed every
            ``lease_ttl/4`` s while JAX compiles (a failed renewal is tried
            again after ``lease_ttl/12``), so it ends about this long after
            its holder was killed: that long the other arms of a sweep stall
            behind a holder that was OOM-killed or preempted, before one of
            them compiles. Default 30 (it was 120). Renewal needs the wrapper
            of ``jax._src.compiler._compile_and_write_cache``; on a JAX
            without that name nothing renews, and a compile longer than
            ``lease_ttl`` loses its lease to a waiter, which compiles it too:
            raise ``lease_ttl`` above your longest compile there.
        lease_wait: the most a miss waits for another holder's entry, in
            seconds, while that holder's lease lives (it is renewed while the
            holder compiles); it compiles itself as soon as the lease ends
            without the entry. Default 3600: a long compile is waited out,
            not repeated. The wait is sent in ``wait_slice`` slices (50 s),
            so a proxy's read timeout does not end it. 0: never wait,
            compile at once.
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
            is open (the server timed out or keeps failing). On SIGTERM, when
            the program set no handler of its own, it waits at most 5 s
            (``_sigterm.BOUND``) and releases its leases, then dies by SIGTERM.
        client: use this :class:`cachesvc.Client` instead of building one.

    Returns:
        The installed backend (its ``stats()`` method returns the counters),
        or None when nothing could be installed (no URL, or this JAX version
        lacks the hooks; a warning says which).
    """
    global _installed, _orig_cache_key_get
    settings = Settings.resolve(url, namespace, token, run, verify_key, lookup_timeout)
    run = settings.run
    if mode is None:
        mode = env("CACHESVC_MODE", "canonical") or "canonical"
        if mode not in MODES:  # a launcher's typo must not stop the job
            log.warning("cachesvc: CACHESVC_MODE=%r is not one of %s; using 'canonical'", mode, MODES)
            mode = "canonical"
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
    try:
        from jax._src import compiler  # only for releasing unused leases (_jaxlease)
    except Exception:  # noqa: BLE001 - leases then last until written or expired
        compiler = None
    missing = [n for n in ("reset_cache", "_cache") if not hasattr(cc, n)]
    if missing:
        log.warning("cachesvc: this JAX version (%s) lacks compilation_cache.%s; "
                    "the shared compile cache is not installed", jax.__version__, ", ".join(missing))
        return None
    if mode == "canonical" and not callable(getattr(ck, "get", None)):
        log.warning("cachesvc: this JAX version (%s) lacks cache_key.get; using mode 'jax-key'",
                    jax.__version__)
        mode = "jax-key"

    client = settings.install_client(client, log, timeout=timeout, retries=retries,
                                     not_installed="the shared compile cache is not installed")
    if client is None:
        return None

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
        backend.leasebook.renew = _jaxlease.install(compiler, installed)
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
    _sigterm.register("jax", _release_at_exit)
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
    _jaxlease.uninstall(sys.modules.get("jax._src.compiler"))
    if cc._cache is _installed:
        cc.reset_cache()
    _installed.flush(_installed.flush_at_exit)
    _installed.release_leases()
    _installed = None
    _sigterm.unregister("jax")


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


def summary() -> str:
    """:func:`stats` as one line for a person: hits of lookups, bytes read and
    written, compile time saved, failures (``print(cachesvc.jax.summary())``
    at the end of a job)."""
    from ._summary import summary as _summary

    return _summary("cachesvc.jax", stats())


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
    except Error as exc:
        if exc.status == 404 and exc.code == "unknown_run":
            # The normal first run of a sweep: nothing to warm, and no
            # warning, which would hide the next real failure for warn_interval.
            log.info("cachesvc: run %r has no manifest on the server yet; nothing to prefetch", run)
            return 0
        b._failed(f"prefetch of run {run!r}", exc)  # a hung or dead server opens the breaker
        return 0
    except Exception as exc:  # noqa: BLE001 - warming is best effort
        b._warn(f"prefetch of run {run!r}", exc)
        return 0


if __name__ == "__main__":  # python -m cachesvc.jax check: see _check.py
    from cachesvc._check import main as _check_main

    sys.exit(_check_main(sys.argv[1:]))
