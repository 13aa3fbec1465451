"""One readable line of an integration's counters (``cachesvc.jax.summary()``,
``cachesvc.torch.summary()``), for the end of a job: ``print(stats())`` is a
dict of some 30 keys, torch's with a nested ``by_cache``."""

from __future__ import annotations

from typing import Any, Mapping


def summary(name: str, stats: Mapping[str, Any]) -> str:
    """``stats`` (an integration's ``stats()``) as one line headed ``name``."""
    if not stats:
        return f"{name}: not installed (see the warning logged by install())"
    n = lambda k: int(stats.get(k) or 0)  # noqa: E731 - a counter, 0 when absent
    lookups, hits = n("lookups"), n("hits")
    parts = [f"{_count(hits, 'hit')} of {_count(lookups, 'lookup')} ({round(100 * hits / lookups)}%)"
             if lookups else "0 lookups answered"]
    failed = []
    if n("errors"):
        failed.append(f"{n('errors')} failed")
    if n("skipped"):
        failed.append(f"{n('skipped')} skipped while the breaker was open")
    if failed:
        parts.append(", ".join(failed) + " (see the warning logged)")
    io = [f"read {_bytes(n('hit_bytes'))}"] if lookups else []
    wrote = f"wrote {_count(n('puts'), 'entry', 'entries')}"
    if n("put_bytes"):
        wrote += f" ({_bytes(n('put_bytes'))})"
    io.append(wrote)
    if n("put_errors"):
        io.append(f"{_count(n('put_errors'), 'write')} failed")
    parts.append(", ".join(io))
    saved = float(stats.get("compile_seconds_saved") or 0.0)
    if saved > 0:
        parts.append(f"saved {_duration(saved)} of compiling")
    by_cache = stats.get("by_cache")
    if isinstance(by_cache, Mapping) and by_cache:
        per = []
        for cache in sorted(by_cache):
            c = by_cache[cache] if isinstance(by_cache[cache], Mapping) else {}
            h, m = int(c.get("hits") or 0), int(c.get("misses") or 0)
            per.append(f"{cache} {h}/{h + m}")
        parts.append("by cache: " + ", ".join(per))
    return f"{name}: " + "; ".join(parts)


def _count(k: int, one: str, many: str | None = None) -> str:
    return f"{k} {one if k == 1 else many or one + 's'}"


def _bytes(b: int) -> str:
    """Decimal units, as the server's tables print sizes for people."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= size:
            return f"{b / size:.1f} {unit}"
    return f"{b} B"


def _duration(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(round(s), 60)
    if m < 60:
        return f"{m} min {sec} s"
    h, m = divmod(m, 60)
    return f"{h} h {m} min"
