"""Mega-Cache blobs in cachesvc: ``torch.compiler.save_cache_artifacts()`` bytes
under the ``pt2`` signature ``{"cache": "mega", "key": run, <environment>}``.

The environment (torch and Triton versions, device kind and capability) is part
of the blob's key: a process only ever loads a blob made in its own environment.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from .._failopen import Settings
from ..client import Client, Error
from . import _keys

log = logging.getLogger("cachesvc.torch")

# Outcomes of a load, for the CLI's exit codes.
LOADED, MISSING, SERVER_ERROR, TORCH_ERROR = "loaded", "missing", "server_error", "torch_error"


@dataclass
class LoadResult:
    """What :func:`load_blob` did: ``status`` is one of ``loaded``, ``missing``,
    ``server_error``, ``torch_error``; ``info`` is torch's ``CacheInfo`` once loaded."""

    status: str
    key: str = ""
    size: int = 0
    seconds: float = 0.0
    info: Any = None
    artifacts: dict[str, int] | None = None
    error: str = ""


def artifact_counts(info: Any) -> dict[str, int]:
    """``{artifact type: count}`` of a torch ``CacheInfo`` (empty if unknown)."""
    try:
        return {str(k): len(v) for k, v in dict(info.artifacts).items()}
    except Exception:  # noqa: BLE001 - another torch's CacheInfo
        return {}


def resolve_client(client: Client | None, installed: Any, **settings: Any) -> Client | None:
    """The client to use: the one given, the installed service's, or one built
    from arguments and ``CACHESVC_*`` variables (None without a URL)."""
    if client is not None:
        return client
    if installed is not None and not any(v for v in settings.values()):
        return installed.client
    s = Settings.resolve(settings.get("url"), settings.get("namespace"), settings.get("token"),
                         settings.get("run"))
    if not s.url:
        return None
    return s.client(timeout=30.0, retries=2)


@dataclass
class Saved:
    """What :func:`save_blob` wrote: the server ``key``, the blob's ``size``
    in bytes, torch's ``artifacts`` counts, and ``conflict``: the run already
    had a blob with other bytes in this environment, which was kept."""

    key: str
    size: int
    artifacts: dict[str, int]
    conflict: bool = False


def save_blob(client: Client, run: str, *, compile_seconds: float | None, timeout: float,
              first_byte_timeout: float | None = None) -> Saved | None:
    """Serializes this process's artifacts and writes them; None when torch
    has nothing to save. Raises on server failures (the caller fails open).
    ``first_byte_timeout`` bounds the wait for the key's answer (a hung server
    fails fast), ``timeout`` each whole request."""
    import torch

    got = torch.compiler.save_cache_artifacts()
    if got is None:
        return None
    blob, info = got
    sig = _keys.mega_signature(run)
    key = client.key(sig, timeout=timeout, first_byte_timeout=first_byte_timeout).key
    conflict = False
    try:
        client.put(key, bytes(blob), compile_seconds=compile_seconds, backend="pt2",
                   name=f"mega:{run}"[:200], timeout=timeout)
    except Error as exc:
        if exc.status != 409:  # 409: this run already saved other bytes; first writer wins
            raise
        conflict = True
    return Saved(key, len(blob), artifact_counts(info), conflict)


def load_blob(client: Client, run: str, *, timeout: float, first_byte_timeout: float | None = None) -> LoadResult:
    """Fetches the run's blob for this environment and pre-fills torch's local
    caches with it (``torch.compiler.load_cache_artifacts``). Never raises.
    ``first_byte_timeout`` bounds the wait for the server's answer (a hung
    server fails fast), ``timeout`` the whole transfer of the blob."""
    t0 = time.monotonic()
    try:
        res = client.lookup_result(_keys.mega_signature(run), timeout=timeout,
                                   first_byte_timeout=first_byte_timeout)
    except Exception as exc:  # noqa: BLE001 - reported in the result
        return LoadResult(SERVER_ERROR, seconds=time.monotonic() - t0, error=f"{type(exc).__name__}: {exc}")
    if res.value is None:
        return LoadResult(MISSING, key=res.key, seconds=time.monotonic() - t0)
    try:
        import torch

        info = torch.compiler.load_cache_artifacts(res.value)
    except Exception as exc:  # noqa: BLE001 - a blob torch cannot read is no blob
        return LoadResult(TORCH_ERROR, key=res.key, size=len(res.value), seconds=time.monotonic() - t0,
                          error=f"{type(exc).__name__}: {exc}")
    if info is None:
        # torch logs why (2.15: "checksum does not match") and returns None
        # instead of raising: that is a blob it could not read, not a load.
        return LoadResult(TORCH_ERROR, key=res.key, size=len(res.value), seconds=time.monotonic() - t0,
                          error=f"torch could not read the {len(res.value)}-byte blob "
                                f"(load_cache_artifacts returned None; torch's log above says why)")
    return LoadResult(LOADED, key=res.key, size=len(res.value), seconds=time.monotonic() - t0,
                      info=info, artifacts=artifact_counts(info))


def blob_info(client: Client, run: str, *, timeout: float, first_byte_timeout: float | None = None) -> dict[str, Any]:
    """Whether the run's blob exists for this environment, without fetching
    it: ``{"present", "key", "size", "compile_seconds", "signature"}``.
    Raises on server failures (a hung one after ``first_byte_timeout``)."""
    sig = _keys.mega_signature(run)
    key = client.key(sig, timeout=timeout, first_byte_timeout=first_byte_timeout).key
    head = client.head(key, timeout=timeout)
    return {"present": head is not None, "key": key, "size": head.size if head else 0,
            "compile_seconds": head.compile_seconds if head else None, "signature": sig}
