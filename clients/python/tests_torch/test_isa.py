"""FX graphs compiled for one CPU vector ISA are not served where Inductor
generates code for another (``cachesvc/torch/_isa.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def _has_avx512() -> bool:
    try:
        return " avx512f " in Path("/proc/cpuinfo").read_text() + " "
    except OSError:
        return False


@pytest.mark.parametrize("capability", [
    "default",
    pytest.param("avx2", marks=pytest.mark.skipif(not _has_avx512(), reason="process A compiles for AVX2 here")),
])
def test_host_with_another_cpu_isa_compiles_its_own_graphs(torch_server: Any, run_torch: Any, process_a: Any,
                                                           capability: str) -> None:
    # ATEN_CPU_CAPABILITY narrows the ISA Inductor generates C++ for, as a
    # host whose CPU lacks process A's would (A's is AVX2 or AVX-512 on any
    # x86-64 CI host; "default" is scalar code). torch's key left the ISA
    # out: this process hit A's graphs and built A's vectorized kernels for
    # its own ISA. Measured on an AVX-512 host: with "default" they did not
    # compile ('at::vec' has not been declared) and the job died; with
    # "avx2" backward raised "requires 3 args", and in a LayerNorm/softmax
    # model 184 of 185 outputs were wrong, one NaN.
    env = {"ATEN_CPU_CAPABILITY": capability}
    b = run_torch(torch_server.url, "ab", env=env).out
    ref = run_torch("", "none", "--mode", "none", env=env).out
    assert b["digests"] == ref["digests"], "outputs differ from a cache-less compile on this ISA"
    assert "fxgraph_cache_hit" not in b["inductor"], b["inductor"]
    assert "autograd_cache_hit" not in b["aot_autograd"], b["aot_autograd"]
    assert b["stats"]["errors"] == 0 and b["stats"]["puts"] > 0, b["stats"]


def test_install_wraps_the_key_details_and_uninstall_restores_them() -> None:
    from torch._inductor.codecache import FxGraphHashDetails

    import cachesvc.torch as ct

    orig = FxGraphHashDetails.__dict__["__init__"]
    assert ct.install("http://127.0.0.1:9", "isa") is not None  # nothing is contacted at install
    try:
        assert getattr(FxGraphHashDetails.__dict__["__init__"], "__cachesvc__", False)
        ct.install("http://127.0.0.1:9", "isa")  # installing again wraps once, not twice
        assert FxGraphHashDetails.__dict__["__init__"].__wrapped__ is orig
    finally:
        ct.uninstall()
    assert FxGraphHashDetails.__dict__["__init__"] is orig
