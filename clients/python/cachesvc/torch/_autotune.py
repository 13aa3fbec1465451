"""Autotune records held until they settle: the bookkeeping.

On a kernel's first launch torch saves its autotune record twice under one
key (torch 2.15, ``torch/_inductor/runtime/triton_heuristics.py``):
``autotune_to_one_config`` saves the benchmarked winner, then, with
coordinate descent tuning on (``max-autotune`` turns it on),
``coordinate_descent_tuning`` saves the config it tuned from there. torch's
own caches (a local file, Redis ``SET``) keep the last write; cachesvc entries
are immutable (the first write wins), so writing each save stored the
untuned winner and refused the tuned config (409). The service therefore
holds each record until it has settled and writes it once (``Service.put``).

A record has settled when:

* the thread that saved it saves another kernel's record: a thread tunes
  kernels one after another (each on its first launch), and both saves of one
  kernel happen in that thread's one launch;
* nothing saved it for ``quiet`` seconds (the last kernel a thread tunes);
* more than ``max_items`` are held (the oldest goes first);
* the process flushes (``cachesvc.torch.flush()``, at exit).

This class is pure (no I/O, no clock, no lock): the service owns it under its
lock, passes the time in, and writes what it returns.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass


@dataclass
class _Held:
    data: bytes
    thread: int  # threading.get_ident() of the last save
    saved_at: float  # time.monotonic() of the last save


class AutotuneHold:
    """The autotune records of one process not written yet, by torch key,
    oldest save first. Not safe for concurrent use: its owner locks."""

    def __init__(self, max_items: int, quiet: float) -> None:
        self._items: collections.OrderedDict[str, _Held] = collections.OrderedDict()
        self._max = max(1, max_items)
        self.quiet = quiet

    def __len__(self) -> int:
        return len(self._items)

    def hold(self, key: str, data: bytes, thread: int, now: float) -> tuple[bool, list[tuple[str, bytes]]]:
        """Holds ``data`` as the record of ``key`` saved by ``thread`` at
        ``now``. Returns whether it replaced a held record of ``key`` (which
        is then never written), and the records that settled and must be
        written now: the others ``thread`` saved, and the oldest beyond the cap."""
        superseded = self._items.pop(key, None) is not None
        settled = [(k, h.data) for k, h in self._items.items() if h.thread == thread]
        for k, _ in settled:
            del self._items[k]
        self._items[key] = _Held(data, thread, now)
        while len(self._items) > self._max:
            k, h = self._items.popitem(last=False)
            settled.append((k, h.data))
        return superseded, settled

    def due(self, now: float) -> list[tuple[str, bytes]]:
        """Removes and returns the records last saved ``quiet`` seconds or
        more before ``now``."""
        out = []
        while self._items:
            k, h = next(iter(self._items.items()))
            if now - h.saved_at < self.quiet:
                break
            del self._items[k]
            out.append((k, h.data))
        return out

    def next_due(self) -> float | None:
        """When the oldest record settles (a ``now`` for :meth:`due`); None
        when nothing is held."""
        for h in self._items.values():
            return h.saved_at + self.quiet
        return None

    def drain(self) -> list[tuple[str, bytes]]:
        """Removes and returns every record held, oldest first."""
        out = [(k, h.data) for k, h in self._items.items()]
        self._items.clear()
        return out
