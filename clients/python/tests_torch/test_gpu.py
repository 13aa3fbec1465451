"""GPU-only: Triton kernels and GEMM autotuning through cachesvc (tests_torch/gpuprog.py).

Runs where ``torch.cuda.is_available()``; skipped elsewhere (CPU-only machines,
including this project's CI). Triton kernels travel inside the FX graph
entries (torch's bundle_triton_into_fx_graph_cache, on by default), so process
B, with empty Inductor and Triton cache directories, must compile no FX graph
and return A's outputs and gradients: bitwise, or within gpuprog.REL_TOLERANCE
where torch re-tuned a reduction's launch config (seen on an H200 with torch
2.11: one bias gradient differed in its last bits).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import HERE, clean_env

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU (torch.cuda.is_available() is False here)")


def _gpu_process(url: str, d: Path, *args: str) -> dict[str, Any]:
    (d / "inductor").mkdir(parents=True)
    (d / "triton").mkdir()
    env = clean_env({"TORCHINDUCTOR_CACHE_DIR": str(d / "inductor"), "TRITON_CACHE_DIR": str(d / "triton")})
    res = subprocess.run([sys.executable, str(HERE / "gpuprog.py"), "--url", url, "--ns", "gpu", *args],
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-6000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_gpu_triton_and_autotune_remote_hits(torch_server: Any, tmp_path: Path) -> None:
    from gpuprog import REL_TOLERANCE, compare

    a = _gpu_process(torch_server.url, tmp_path / "A", "--run", "gpu-a", "--save", "--dump", str(tmp_path / "A.pt"))
    assert a["inductor"].get("fxgraph_cache_miss", 0) >= 1, a["inductor"]
    assert a["stats"]["puts"] >= 1 and a["stats"]["put_errors"] == 0, a["stats"]
    assert a["mega_saved"], "no Mega-Cache saved"
    b = _gpu_process(torch_server.url, tmp_path / "B", "--dump", str(tmp_path / "B.pt"))
    assert "fxgraph_cache_miss" not in b["inductor"], b["inductor"]
    assert b["inductor"].get("fxgraph_cache_hit") == a["inductor"]["fxgraph_cache_miss"], b["inductor"]
    assert b["stats"]["errors"] == 0, b["stats"]
    assert b["stats"]["by_cache"].get("fx-graph-v1", {}).get("misses", 0) == 0, b["stats"]["by_cache"]
    identical, worst, differ = compare(tmp_path / "A.pt", tmp_path / "B.pt")
    assert identical or worst <= REL_TOLERANCE, f"{differ} differ by up to {worst:.3g} (relative)"
