"""Several shape classes of one FX graph key (``cachesvc.torch``).

torch keys an FX graph (and an AOTAutograd entry) without the guards on its
symbolic sizes: they are stored inside the value, and a lookup walks the
candidates of the key (``GuardedCache.iterate_over_candidates`` in
``torch/_inductor/codecache.py``), taking the first whose guards hold. The
local cache keeps one file per candidate; a remote cache holds one value per
key. cachesvc entries are immutable, so the first shape class written kept
the key, and every later process of another class (e.g. a length past a
guard Inductor added while generating a kernel) failed its guards, compiled
again and had its write refused, for good.

So a process whose remote candidates all failed their guards writes its
graph as the next candidate of the key: torch's key with ``~<n>`` after its
hash (``pt2:fx-graph-v1::<key>~1:c1``), at most :data:`SLOTS`
candidates per key in all. A lookup fetches candidate ``n+1`` only after
torch rejected candidate ``n``, so a hit on the first costs one request as
before. A candidate of the same class written twice (two processes racing)
is refused like any other second write (409): the slot holds one of them.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from typing import Iterator

from . import _keys

SLOTS = 4
"""Candidates kept per key, torch's own included: beyond, a class compiles
and its write is refused as before (counted as ``candidates_full``)."""

_SEP = "~"


def slot_key(full_key: str, slot: int) -> str | None:
    """torch's key of candidate ``slot`` of ``full_key`` (slot 0 is
    ``full_key`` itself), or None when the key does not split."""
    if slot == 0:
        return full_key
    parts = _keys.split_key(full_key)
    if parts is None or _SEP in parts[1]:
        return None
    cache, key, fmt = parts
    return f"pt2:{cache}::{key}{_SEP}{slot}:{fmt}"


def slot_of(full_key: str) -> int:
    """The candidate index of a key from :func:`slot_key` (0 for torch's own)."""
    parts = _keys.split_key(full_key)
    if parts is None or _SEP not in parts[1]:
        return 0
    tail = parts[1].rsplit(_SEP, 1)[1]
    return int(tail) if tail.isdigit() else 0


def torch_key(key: str) -> str:
    """torch's bare key of a candidate's bare key (``<key>~1`` -> ``<key>``)."""
    return key.rsplit(_SEP, 1)[0] if _SEP in key else key


class Slots:
    """Per thread, the candidate a lookup asks for; per key, the slot its
    write takes after every stored candidate failed its guards (bounded)."""

    MAX_KEYS = 1024  # keys remembered from their guard miss until their write

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._next: collections.OrderedDict[str, int] = collections.OrderedDict()

    @contextlib.contextmanager
    def at(self, slot: int) -> Iterator[None]:
        """This thread's lookups ask for candidate ``slot`` meanwhile."""
        self._local.n = slot
        try:
            yield
        finally:
            self._local.n = 0

    def lookup_key(self, full_key: str) -> str | None:
        """The key this thread's lookup of torch's ``full_key`` asks for (None:
        a candidate of a key that does not split); remembers ``full_key``."""
        self._local.key = full_key
        return slot_key(full_key, getattr(self._local, "n", 0))

    def take_torch_key(self) -> str | None:
        """torch's key of this thread's last lookup (None: none since the
        last call), cleared."""
        k = getattr(self._local, "key", None)
        self._local.key = None
        return k

    def rejected(self, full_key: str, slot: int) -> bool:
        """Candidate ``slot`` of ``full_key`` failed its guards: the key's
        write goes to the next slot. False when none is left."""
        with self._lock:
            if slot + 1 >= SLOTS:
                self._next.pop(full_key, None)
                return False
            self._next[full_key] = slot + 1
            self._next.move_to_end(full_key)
            while len(self._next) > self.MAX_KEYS:
                self._next.popitem(last=False)
        return True

    def write_key(self, full_key: str) -> str:
        """The key torch's write of ``full_key`` goes to: the slot after the
        candidates it rejected, else ``full_key``."""
        with self._lock:
            slot = self._next.pop(full_key, 0)
        return slot_key(full_key, slot) or full_key
