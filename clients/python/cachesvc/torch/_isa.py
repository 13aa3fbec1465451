"""The CPU's vector ISA in torch's FX graph and AOTAutograd keys.

Inductor generates CPU C++ kernels for the vector ISA it picks on this host
(``torch._inductor.cpu_vec_isa.pick_vec_isa()``: AVX2, AVX-512, AMX, ...;
``ATEN_CPU_CAPABILITY`` narrows it) and writes the lanes of that ISA into
the source: a loop steps by 16 floats for AVX-512, by 8 for AVX2. torch
2.15's keys (``FxGraphHashDetails``) hash the thread count such kernels were
generated for but not the ISA, so an AVX2 host looked up the graph an
AVX-512 host had compiled, built its AVX-512 source for AVX2 and computed
something else (measured: NaN in the output, other values off; a cache-less
compile on that host is exact). One host's local cache never sees two ISAs;
a cache shared by hosts does.

We wrap ``FxGraphHashDetails.__init__`` (AOTAutograd's details are a
subclass and call it) to add the picked ISA and its compiler flags as one
more attribute, which torch's pickler hashes into the key, for a graph that
may generate CPU C++ code (torch's own test, the one it uses for the thread
count). GPU-only graphs keep torch's key. Entries written by stock torch
(the Redis-protocol listener) then no longer serve graphs with CPU code to
this client, and the other way round.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable

log = logging.getLogger("cachesvc.torch")

TARGET = ("torch._inductor.codecache", "FxGraphHashDetails")
"""The class whose instances torch hashes into FX graph and AOTAutograd keys."""

ATTR = "cachesvc_cpu_vec_isa"
"""The attribute added to the details (shown as ``other`` on a miss)."""


def picked_isa() -> str:
    """The vector ISA Inductor generates CPU code for here and its compiler
    flags (e.g. ``avx2 -mavx2 -mfma -mf16c``)."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    isa = pick_vec_isa()
    return f"{isa} {isa.build_arch_flags()}".strip()


def wrap_init(orig: Callable[..., None]) -> Callable[..., None]:
    """Wraps ``FxGraphHashDetails.__init__(self, gm, example_inputs, ...)`` to
    add :data:`ATTR` when the graph may generate CPU C++ code."""

    @functools.wraps(orig)
    def __init__(self: Any, gm: Any, example_inputs: Any, *args: Any, **kwargs: Any) -> None:
        orig(self, gm, example_inputs, *args, **kwargs)
        try:
            may = getattr(type(self), "_may_generate_cpu_cpp_code", None)
            if may is None or may(gm, example_inputs):  # unknown: key it (a miss, never a wrong hit)
                setattr(self, ATTR, picked_isa())
        except Exception as exc:  # noqa: BLE001 - never break torch's hashing
            # Still keyed apart from hosts that know their ISA.
            setattr(self, ATTR, f"unknown ({type(exc).__name__})")
            log.debug("cachesvc: cannot read Inductor's CPU vector ISA: %s", exc)

    __init__.__cachesvc__ = True  # type: ignore[attr-defined]
    return __init__
