"""Self-healing for :mod:`cachesvc.torch`: report artifacts torch cannot load.

torch 2.15 loads an FX graph or AOTAutograd entry from a remote cache in
``GuardedCache.iterate_over_candidates`` (``torch/_inductor/codecache.py``):
``remote_cache.get(key)`` (our backend's ``_get``), then the JSON value's
base64 ``data`` is decoded and unpickled. When that raises, torch logs
"unable to load compiled graph" and the generator ends: a miss, torch
compiles, and nothing tells the cache.

We wrap ``iterate_over_candidates`` and hand it a proxy of the remote cache
that notes whether our backend returned a value (and under which server
key). When the generator then ends without having yielded a remote
candidate, the value failed to load: it is reported to the server
(``Client.report``) with the exception torch logged, and torch's miss
stands. A generator the caller closes early (it took a local candidate)
reports nothing. Reporting is fail-open and never raises into torch.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Iterator

log = logging.getLogger("cachesvc.torch")

TARGET = ("torch._inductor.codecache", "GuardedCache")
"""The class whose ``iterate_over_candidates`` loads remote artifacts."""

_TORCH_LOGGER = "torch._inductor.codecache"
_LOAD_FAILED = "unable to load compiled graph"


class _Captured(logging.Handler):
    """Keeps, per thread, the last exception torch logged when it could not
    load a compiled graph (the reason sent with the report)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.local = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        if _LOAD_FAILED in str(record.msg) and record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            self.local.last = f"{type(exc).__name__}: {exc}"

    def take(self) -> str:
        v = getattr(self.local, "last", "")
        self.local.last = ""
        return v


class _Probe:
    """A remote cache that records whether our backend served a value."""

    def __init__(self, remote: Any, service: Any) -> None:
        self._remote = remote
        self._service = service
        self.served: str | None = None  # server key of the value served

    def get(self, key: str) -> Any:
        self._service.take_hit()
        v = self._remote.get(key)
        if v is not None:
            self.served = self._service.take_hit()
        return v

    def __getattr__(self, name: str) -> Any:
        return getattr(self._remote, name)


def wrap(cls: type, service: Any) -> tuple[Callable[[], None], bool]:
    """Wraps ``cls.iterate_over_candidates`` to report remote values torch
    cannot load; returns the undo step and whether it could."""
    raw = cls.__dict__.get("iterate_over_candidates")
    orig = getattr(raw, "__func__", None)
    if orig is None:
        return (lambda: None), False
    captured = _Captured()
    tlog = logging.getLogger(_TORCH_LOGGER)

    def iterate_over_candidates(klass: type, local: bool, remote_cache: Any, key: str) -> Iterator[Any]:
        if remote_cache is None:
            yield from orig(klass, local, remote_cache, key)
            return
        probe = _Probe(remote_cache, service)
        remote_yielded = False
        captured.take()
        for cand in orig(klass, local, probe, key):
            if len(cand) > 2 and cand[2] is False:
                remote_yielded = True
            yield cand
        if probe.served is not None and not remote_yielded:
            why = captured.take() or "see the torch log"
            service.load_failed(probe.served, f"torch could not load the {klass.__name__} artifact: {why}")

    iterate_over_candidates.__cachesvc__ = True  # type: ignore[attr-defined]
    cls.iterate_over_candidates = classmethod(iterate_over_candidates)  # type: ignore[assignment]
    tlog.addHandler(captured)

    def undo() -> None:
        cls.iterate_over_candidates = raw  # type: ignore[assignment]
        tlog.removeHandler(captured)

    return undo, True
