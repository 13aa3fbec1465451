"""Compile leases for :mod:`cachesvc.torch` (``install(leases=True)``).

Without leases, processes that start together (the arms of a sweep, the
ranks of a job with one cache per host) all miss the same FX graph and all
compile it. With them, the first to miss takes the server's lease on the
graph's key and compiles; the others long-poll for its entry and load it.

Inductor compiles one FX graph per call of
``torch._inductor.compile_fx._compile_fx_inner`` (``compile_fx_inner`` looks
it up by module attribute on each call): the FX graph cache's remote lookup,
the compile and the write all happen inside it. We wrap it so that when it
returns or raises, the leases its thread took end (:meth:`LeaseBook.compile_ended`)
unless their entry is being written: a graph torch does not save (a compile
that raised) then keeps no waiter waiting. Only the FX graph cache takes
leases: AOTAutograd's entry is written after its forward and backward
graphs, which are leased themselves, and the other caches hold small
results. Without that name (another torch), no lease is taken.
"""

from __future__ import annotations

from typing import Any, Callable

TARGET = ("torch._inductor.compile_fx", "_compile_fx_inner")
"""The function whose call is one FX graph's lookup, compile and write."""


def wrap(module: Any, ended: Callable[[], None]) -> tuple[Callable[[], None], bool]:
    """Wraps ``module._compile_fx_inner`` so that ``ended()`` runs when it
    returns or raises; returns the undo step and whether it could."""
    orig = getattr(module, TARGET[1], None)
    if not callable(orig):
        return (lambda: None), False

    def _compile_fx_inner(*args: Any, **kwargs: Any) -> Any:
        try:
            return orig(*args, **kwargs)
        finally:
            ended()

    _compile_fx_inner.__wrapped__ = orig  # type: ignore[attr-defined]
    _compile_fx_inner.__cachesvc__ = True  # type: ignore[attr-defined]
    setattr(module, TARGET[1], _compile_fx_inner)

    def undo() -> None:
        if getattr(module, TARGET[1], None) is _compile_fx_inner:
            setattr(module, TARGET[1], orig)

    return undo, True
