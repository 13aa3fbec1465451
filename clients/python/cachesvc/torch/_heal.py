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

The same wrapper walks a key's shape-class candidates (``_candidates``):
when torch resumes it after a remote candidate, that candidate failed its
guards, so it fetches the key's next one, and tells the service which key
and slot were rejected (the write of the graph torch then compiles goes to
the next slot).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Iterator

from . import _candidates

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
    """A remote cache that asks for candidate ``slot`` of torch's key
    (``_candidates``) and records whether our backend served a value."""

    def __init__(self, remote: Any, service: Any, slot: int) -> None:
        self._remote = remote
        self._service = service
        self._slot = slot
        self.served: str | None = None  # server key of the value served
        self.torch_key: str | None = None  # the key as our backend received it

    def get(self, key: str) -> Any:
        self._service.take_hit()
        self._service.slots.take_torch_key()
        with self._service.slots.at(self._slot):
            v = self._remote.get(key)
        self.torch_key = self._service.slots.take_torch_key()  # None: not our backend
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
        # Candidate n+1 is fetched only when torch resumes us after candidate
        # n: it failed its guards (a hit stops the walk: one request).
        for slot in range(_candidates.SLOTS):
            probe = _Probe(remote_cache, service, slot)
            remote_yielded = False
            captured.take()
            for cand in orig(klass, local and slot == 0, probe, key):
                if len(cand) > 2 and cand[2] is False:
                    remote_yielded = True
                yield cand
            if probe.served is None or probe.torch_key is None:
                return  # a miss (no later candidate was written), or not our backend
            if not remote_yielded:
                why = captured.take() or "see the torch log"
                service.load_failed(probe.served, f"torch could not load the {klass.__name__} artifact: {why}")
            else:
                service.guard_missed(probe.torch_key, slot)

    iterate_over_candidates.__cachesvc__ = True  # type: ignore[attr-defined]
    cls.iterate_over_candidates = classmethod(iterate_over_candidates)  # type: ignore[assignment]
    tlog.addHandler(captured)

    def undo() -> None:
        cls.iterate_over_candidates = raw  # type: ignore[assignment]
        tlog.removeHandler(captured)

    return undo, True
