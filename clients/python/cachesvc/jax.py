"""A JAX persistent-compilation-cache backend that stores executables in cachesvc.

One line at the top of a training script::

    import cachesvc.jax; cachesvc.jax.install("http://cache:8080")

or, with no code change beyond the import, from the environment
(``CACHESVC_URL``, ``CACHESVC_NAMESPACE``, ``CACHESVC_TOKEN``, ``CACHESVC_RUN``,
``CACHESVC_MODE``)::

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

Fault tolerance: a server that is down, slow or failing behaves as a miss. One
warning is logged (then at most one per ``warn_interval`` seconds); a failed
write never raises into JAX; every call has a time budget; after
``breaker_threshold`` consecutive failures the backend stops calling the
server for ``breaker_cooldown`` seconds (a circuit breaker), so training is not
slowed by repeated timeouts.

Compile seconds: JAX stores the compile time as a 4-byte big-endian count of
*whole* seconds at the start of the *compressed* value, which is 0 for most
programs. We measure instead the time from the miss (our ``get``) to the write
(our ``put``), which spans XLA compilation plus serialization, and send that as
``X-Compile-Seconds``; when no miss was observed we decompress the header
(zlib, or JAX's own codec) and send its whole seconds.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import os
import socket
import sys
import threading
import time
import uuid
import zlib
from dataclasses import asdict, dataclass
from typing import Any, Callable

from .client import Client, Error

__all__ = ["install", "uninstall", "installed", "stats", "CacheStats"]

log = logging.getLogger("cachesvc.jax")

MODES = ("canonical", "jax-key")

_lock = threading.Lock()
_installed: Any = None  # the installed backend (a CacheInterface subclass instance)
_orig_cache_key_get: Callable[..., str] | None = None


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


class _Breaker:
    """Counts consecutive failures; opens for ``cooldown`` s after ``threshold``.

    While open, :meth:`allow` is False. After the cooldown one call is let
    through (half-open); its failure re-opens the breaker at once.
    """

    def __init__(self, threshold: int, cooldown: float) -> None:
        self.threshold = max(1, threshold)
        self.cooldown = cooldown
        self.failures = 0
        self.open_until = 0.0
        self._lock = threading.Lock()

    def allow(self) -> bool:
        with self._lock:
            return time.monotonic() >= self.open_until

    def success(self) -> None:
        with self._lock:
            self.failures = 0
            self.open_until = 0.0

    def failure(self) -> bool:
        """Records a failure; returns True if this opened the breaker."""
        with self._lock:
            self.failures += 1
            if self.failures >= self.threshold:
                self.open_until = time.monotonic() + self.cooldown
                return True
            return False


def _env(name: str, default: str | None = None) -> str | None:
    v = os.environ.get(name)
    return v if v else default


def _default_run_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


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
    put_timeout: float | None = None,
    retries: int = 2,
    warn_interval: float = 60.0,
    breaker_threshold: int = 3,
    breaker_cooldown: float = 30.0,
    client: Client | None = None,
) -> Any:
    """Installs cachesvc as JAX's persistent compilation cache.

    Args:
        url: the server URL; default ``$CACHESVC_URL``. With neither, a warning
            is logged and nothing is installed (returns None).
        namespace: default ``$CACHESVC_NAMESPACE`` or ``"default"``.
        token: bearer token; default ``$CACHESVC_TOKEN``.
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
        timeout: time budget in seconds of one lookup, retries included.
        put_timeout: time budget of one write; default ``timeout`` plus one
            second per 20 MB of value.
        retries: retries after a connection error or a 503, within the budget.
        warn_interval: at most one warning per this many seconds.
        breaker_threshold: consecutive failures that open the circuit breaker.
        breaker_cooldown: seconds the breaker stays open.
        client: use this :class:`cachesvc.Client` instead of building one.

    Returns:
        The installed backend (its ``stats()`` method returns the counters),
        or None when nothing could be installed (no URL, or this JAX version
        lacks the hooks; a warning says which).
    """
    global _installed, _orig_cache_key_get
    url = url or _env("CACHESVC_URL")
    namespace = namespace or _env("CACHESVC_NAMESPACE", "default")
    token = token or _env("CACHESVC_TOKEN")
    mode = mode or _env("CACHESVC_MODE", "canonical")
    run = run or _env("CACHESVC_RUN") or _default_run_id()
    if mode not in MODES:
        raise ValueError(f"cachesvc.jax.install: mode must be one of {MODES}, got {mode!r}")
    if client is None and not url:
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
        client = Client(url, namespace=namespace, token=token, timeout=timeout,
                        retries=retries, run=run)
    elif client.run is None:
        client.run = run

    backend_cls = _backend_class(CacheInterface)
    backend = backend_cls(
        client=client,
        mode=mode,
        timeout=timeout,
        put_timeout=put_timeout,
        warn_interval=warn_interval,
        breaker=_Breaker(breaker_threshold, breaker_cooldown),
        decompress=getattr(cc, "decompress_executable", None),
    )

    with _lock:
        _uninstall_locked()
        jax.config.update("jax_enable_compilation_cache", True)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_secs))
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", int(min_entry_size_bytes))
        cc.reset_cache()
        cc._cache = backend
        if mode == "canonical":
            orig = ck.get
            _orig_cache_key_get = orig

            def get_with_signature(module, devices, compile_options, backend_, *args: Any, **kwargs: Any) -> str:
                key = orig(module, devices, compile_options, backend_, *args, **kwargs)
                backend._capture(key, module, devices, compile_options, backend_, args, kwargs)
                return key

            get_with_signature.__wrapped__ = orig  # type: ignore[attr-defined]
            get_with_signature.__cachesvc__ = True  # type: ignore[attr-defined]
            ck.get = get_with_signature
        _installed = backend
    log.info("cachesvc: JAX compilation cache -> %s namespace=%s mode=%s run=%s",
             client.url, client.namespace, mode, run)
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
    if cc._cache is _installed:
        cc.reset_cache()
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


def _backend_class(base: type) -> type:
    """Builds the backend class on JAX's ``CacheInterface`` (imported lazily)."""

    class CachesvcCache(base):  # type: ignore[misc, valid-type]
        """JAX ``CacheInterface`` storing values in a cachesvc server."""

        _MAX_PENDING = 512  # bounded per-key bookkeeping between key, get and put

        def __init__(self, *, client: Client, mode: str, timeout: float, put_timeout: float | None,
                     warn_interval: float, breaker: _Breaker,
                     decompress: Callable[[bytes], bytes] | None) -> None:
            self._path = f"cachesvc:{client.url}/{client.namespace}"
            self.client = client
            self.mode = mode
            self.timeout = timeout
            self.put_timeout = put_timeout
            self.warn_interval = warn_interval
            self.breaker = breaker
            self._decompress = decompress
            self._stats = CacheStats()
            self._lock = threading.Lock()
            self._last_warn = -1e18
            # jax key -> signature (canonical mode), server key, miss time
            self._signatures: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
            self._server_keys: collections.OrderedDict[str, tuple[str, float]] = collections.OrderedDict()

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
            now = time.monotonic()
            with self._lock:
                due = now - self._last_warn >= self.warn_interval
                if due:
                    self._last_warn = now
            if due:
                log.warning("cachesvc: %s failed (%s); compiling without the shared cache "
                            "(further cachesvc warnings suppressed for %.0fs)",
                            what, exc, self.warn_interval)
            else:
                log.debug("cachesvc: %s failed: %s", what, exc)

        def _failed(self, what: str, exc: BaseException) -> None:
            transient = not isinstance(exc, Error) or exc.status == 0 or exc.status >= 500
            if transient and self.breaker.failure():
                log.debug("cachesvc: circuit breaker open for %.0fs", self.breaker.cooldown)
            self._warn(what, exc)

        # ---- signatures --------------------------------------------------------

        def _capture(self, jax_key: str, module: Any, devices: Any, compile_options: Any,
                     backend: Any, args: tuple, kwargs: dict) -> None:
            """Called from the wrapped ``cache_key.get``: records the xla signature."""
            try:
                sig = _xla_signature(module, devices, compile_options, backend, args, kwargs)
            except Exception as exc:  # noqa: BLE001 - never break JAX's key computation
                with self._lock:
                    self._stats.canonical_fallbacks += 1
                log.debug("cachesvc: cannot build xla signature for %s: %s", jax_key, exc)
                return
            self._remember(self._signatures, jax_key, sig)

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
            if not self.breaker.allow():
                with self._lock:
                    self._stats.skipped += 1
                return None
            sig = self._signature(key)
            t0 = time.monotonic()
            try:
                res = self.client.lookup_result(sig, timeout=self.timeout)
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
            if res.value is None:
                with self._lock:
                    self._stats.misses += 1
                if res.key:
                    self._remember(self._server_keys, key, (res.key, now))
                return None
            with self._lock:
                self._stats.hits += 1
                self._stats.hit_bytes += len(res.value)
                self._stats.compile_seconds_saved += res.compile_seconds or 0.0
            return res.value

        def put(self, key: str, value: bytes) -> None:
            """Stores JAX's value; never raises."""
            try:
                self._put(key, value)
            except Exception as exc:  # noqa: BLE001 - a failed write never reaches JAX
                with self._lock:
                    self._stats.put_errors += 1
                self._failed(f"write of {key.split('-')[0]}", exc)

        def _put(self, key: str, value: bytes) -> None:
            if not self.breaker.allow():
                with self._lock:
                    self._stats.skipped += 1
                return
            with self._lock:
                known = self._server_keys.pop(key, None)
                sig = self._signatures.pop(key, None) if self.mode == "canonical" else None
            compile_seconds: float | None = None
            if known is not None:
                server_key, missed_at = known
                compile_seconds = time.monotonic() - missed_at
            else:
                if sig is None:
                    sig = self._signature(key)
                server_key = self.client.key(sig, timeout=self.timeout).key
            if compile_seconds is None:
                compile_seconds = _compile_seconds_from_value(value, self._decompress)
            name = key.rsplit("-", 1)[0] if "-" in key else key
            t0 = time.monotonic()
            try:
                res = self.client.put(
                    server_key, value,
                    compile_seconds=compile_seconds,
                    backend="xla" if sig is not None or self.mode == "canonical" else "passthrough",
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
    }
