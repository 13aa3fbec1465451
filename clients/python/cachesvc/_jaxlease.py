"""Releasing a compile lease when JAX compiled but wrote nothing.

Under leases (:func:`cachesvc.jax.install` ``leases=True``) a miss takes the
server's lease on the key and JAX compiles; the lease ends when our ``put``
writes the entry. But JAX does not always write: never for a program with
host callbacks (``jax.debug.print``, ``io_callback``), not under
``jax_persistent_cache_min_compile_time_secs``, not when the compile raised.
The lease then stayed held while the process lived (up to ``lease_ttl``), and
every other process compiling that program waited ``lease_wait`` for an entry
that never came.

We wrap ``jax._src.compiler._compile_and_write_cache`` (``compile_or_get_cached``
calls it through the module attribute): when it returns or raises, the
backend releases the key's lease unless ``put`` was called for it (then the
write releases it), so waiters compile at once. With the wrapper in place the
backend also renews a held lease while JAX compiles, so a compile longer than
``lease_ttl`` keeps it. Without that name (another JAX version) nothing is
wrapped: a lease then lasts until the write or ``lease_ttl`` (30 s by
default), and a compile longer than that is compiled again by the waiter that
takes the expired lease over.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

_orig: Callable[..., Any] | None = None


def install(compiler: Any, current: Callable[[], Any]) -> bool:
    """Wraps ``compiler._compile_and_write_cache``; ``current()`` returns the
    installed backend (or None). Returns whether the wrapper is in place
    (idempotent); False when JAX lacks the name or its ``cache_key``
    parameter."""
    global _orig
    fn = getattr(compiler, "_compile_and_write_cache", None)
    if fn is None:
        return False
    if getattr(fn, "__cachesvc__", False):
        return True
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    if "cache_key" not in sig.parameters:
        return False
    orig = fn

    def _compile_and_write_cache(*args: Any, **kwargs: Any) -> Any:
        try:
            return orig(*args, **kwargs)
        finally:
            b = current()
            if b is not None:
                try:
                    key = sig.bind(*args, **kwargs).arguments.get("cache_key")
                except TypeError:
                    key = None
                if isinstance(key, str):
                    b.compile_ended(key)

    _compile_and_write_cache.__wrapped__ = orig  # type: ignore[attr-defined]
    _compile_and_write_cache.__cachesvc__ = True  # type: ignore[attr-defined]
    _orig = orig
    compiler._compile_and_write_cache = _compile_and_write_cache
    return True


def uninstall(compiler: Any) -> None:
    """Restores ``compiler._compile_and_write_cache``."""
    global _orig
    if _orig is not None and getattr(getattr(compiler, "_compile_and_write_cache", None), "__cachesvc__", False):
        compiler._compile_and_write_cache = _orig
    _orig = None
