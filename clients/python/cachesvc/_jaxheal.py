"""Self-healing for :mod:`cachesvc.jax`: report entries JAX cannot load.

JAX hands the bytes our ``get`` returned to
``jax._src.compilation_cache.get_executable_and_time``, which decompresses
them and calls ``backend.deserialize_executable``. The server checked their
SHA-256, so what fails there is bytes that were stored wrong (a writer's bug,
another jaxlib build, a truncated value compressed whole). JAX's
``compiler._cache_read`` catches the exception, warns and compiles; nothing
tells the cache, so every host would fetch the same bad entry forever.

We wrap ``get_executable_and_time`` (``compiler._cache_read`` calls it
through the module attribute): when it raises for a key whose value came
from the server, the entry is reported (``Client.report``, with the
exception text) and the call returns ``(None, None)``, a miss, so JAX
compiles whatever ``jax_raise_persistent_cache_errors`` says. After
``--quarantine-after`` distinct clients reported it the server stops serving
it, and the next writer's compile replaces it. Reporting is fail-open: it
respects the circuit breaker, has a short budget, and never raises.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

log = logging.getLogger("cachesvc.jax")

REPORT_TIMEOUT = 3.0
"""The time budget of one report, in seconds (it runs in JAX's compile path)."""

_orig: Callable[..., Any] | None = None


def install(cc: Any, current: Callable[[], Any]) -> None:
    """Wraps ``cc.get_executable_and_time``; ``current()`` returns the
    installed backend (or None). Idempotent."""
    global _orig
    fn = getattr(cc, "get_executable_and_time", None)
    if fn is None or getattr(fn, "__cachesvc__", False):
        return
    orig = fn

    def get_executable_and_time(cache_key: str, *args: Any, **kwargs: Any) -> Any:
        try:
            got = orig(cache_key, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - re-raised unless the value was ours
            b = current()
            if b is None or getattr(cc, "_cache", None) is not b or not load_failed(b, cache_key, exc):
                raise
            return None, None
        b = current()
        if b is not None:
            with b._lock:
                b._served.pop(cache_key, None)  # loaded fine
        return got

    get_executable_and_time.__wrapped__ = orig  # type: ignore[attr-defined]
    get_executable_and_time.__cachesvc__ = True  # type: ignore[attr-defined]
    _orig = orig
    cc.get_executable_and_time = get_executable_and_time


def uninstall(cc: Any) -> None:
    """Restores ``cc.get_executable_and_time``."""
    global _orig
    if _orig is not None and getattr(getattr(cc, "get_executable_and_time", None), "__cachesvc__", False):
        cc.get_executable_and_time = _orig
    _orig = None


def load_failed(b: Any, jax_key: str, exc: BaseException) -> bool:
    """Handles JAX failing to load the value ``b`` served for ``jax_key``:
    reports it to the server and returns True (treat as a miss), or returns
    False when the value did not come from the server (a local-tier hit:
    JAX's own handling applies). Never raises."""
    with b._lock:
        server_key = b._served.pop(jax_key, None)
    if server_key is None:
        return False
    reason = f"JAX could not load the executable: {type(exc).__name__}: {exc}"
    with b._lock:
        b._stats.load_failures += 1
    log.warning("cachesvc: entry %s (JAX key %s) fetched from the cache failed to load (%s: %s); "
                "reporting it and compiling", server_key, jax_key.split("-")[0], type(exc).__name__,
                str(exc)[:200])
    if b.local is not None:
        _drop_local(b.local, jax_key)
    if not b.breaker.allow():
        return True
    try:
        res = b.client.report(server_key, reason, timeout=min(b.timeout, REPORT_TIMEOUT))
    except Exception as rexc:  # noqa: BLE001 - a failed report never reaches JAX
        b._failed(f"report of {server_key[:12]}", rexc)
        return True
    b.breaker.success()
    with b._lock:
        b._stats.reports += 1
        if res is not None and res.quarantined:
            b._stats.reports_quarantined += 1
    return True


def _drop_local(local: Any, jax_key: str) -> None:
    """Removes jax_key from JAX's LRUCache local tier (we copied the bad
    value there on the hit), best effort."""
    path = getattr(local, "path", None)
    if path is None:
        return
    for suffix in ("-cache", "-atime"):
        try:
            (path / f"{jax_key}{suffix}").unlink(missing_ok=True)
        except Exception:  # noqa: BLE001
            pass
