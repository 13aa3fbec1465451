"""One GPU training process for scripts/gpu-check.sh and tests_torch/test_gpu.py.

A small matmul model on CUDA compiled with ``mode="max-autotune-no-cudagraphs"``
(Triton kernels plus GEMM autotuning), forward and backward, a few steps.
Prints one JSON line: torch's compile counters, cachesvc's counters, digests of
outputs and gradients, and the time to the first result.

    python gpuprog.py --url URL --ns NS [--run RUN --save] [--dump FILE]

``--dump`` saves the first step's output and gradients (torch.save) for
``compare``: a process that hits every FX graph runs A's kernels, but torch
re-tunes a reduction's launch config when its autotune entry is not found,
which can change the summation order and so the last bits of a gradient.

Run it in a fresh interpreter with empty TORCHINDUCTOR_CACHE_DIR and
TRITON_CACHE_DIR. Exits 77 without a CUDA device.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

T0 = time.monotonic()
import torch  # noqa: E402

import cachesvc.torch  # noqa: E402


# Largest |a - b| / max|a| accepted between two processes' float32 results:
# a reordered reduction moves the last bits (~1e-7), a wrong kernel far more.
REL_TOLERANCE = 1e-5


def compare(path_a: str | Path, path_b: str | Path) -> tuple[bool, float, list[str]]:
    """Compares two ``--dump`` files: (bitwise identical, largest relative
    difference, names of the tensors that differ at all)."""
    a, b = torch.load(path_a), torch.load(path_b)
    if a.keys() != b.keys():
        return False, float("inf"), sorted(a.keys() ^ b.keys())
    worst, differ = 0.0, []
    for name in sorted(a):
        x, y = a[name].double(), b[name].double()
        if x.shape != y.shape:
            return False, float("inf"), [name]
        if torch.equal(x, y):
            continue
        differ.append(name)
        scale = max(x.abs().max().item(), 1e-30)
        worst = max(worst, (x - y).abs().max().item() / scale)
    return not differ, worst, differ


def digest(t: torch.Tensor) -> str:
    """sha256 of the exact values."""
    return hashlib.sha256(repr(t.detach().float().cpu().flatten().tolist()).encode()).hexdigest()


class MLP(torch.nn.Module):
    """512 -> 1024 -> 512 with GELU: two GEMMs to autotune."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(512, 1024)
        self.b = torch.nn.Linear(1024, 512)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """b(gelu(a(x)))."""
        return self.b(torch.nn.functional.gelu(self.a(x)))


def record_autotune_saves(svc: Any) -> set[str]:
    """The torch keys of the autotune records torch saves in this process
    (filled as it saves; the backend calls ``svc.put``). A save needs no
    lookup in this process (a kernel tuned in a compile worker looked itself
    up there, without cachesvc), so misses() alone cannot list them."""
    saved: set[str] = set()
    put = svc.put

    def recording_put(key: str, value: Any) -> None:
        parts = key.split("::", 1)
        if key.startswith("pt2:") and len(parts) == 2 and "-" not in parts[0]:  # per-kernel autotune cache
            saved.add(key)
        put(key, value)

    svc.put = recording_put
    return saved


def record_autotune_kernels() -> dict[str, str]:
    """Which kernel each autotune lookup in this process is for: torch's key
    ``pt2:<cache id>::<key>:c1`` -> "<kernel name>, <n> configs" (the name
    says the kind: triton_poi/red/per for pointwise and reductions,
    triton_tem for GEMM templates, which torch never tunes by coordinate
    descent, so never saves). Wraps check_autotune_cache, which every lookup
    of a kernel's record goes through (cached_autotune, and the recheck of an
    autotuner loaded from an FX graph entry); only lookups in this process
    are seen (not a compile worker's). Best effort: empty if torch changed."""
    found: dict[str, str] = {}
    try:
        from torch._inductor.runtime import triton_heuristics as th

        orig = th.check_autotune_cache

        def check_autotune_cache(configs: Any, filename: Any, inductor_meta: Any, *args: Any, **kw: Any) -> Any:
            got = orig(configs, filename, inductor_meta, *args, **kw)
            try:
                cache = got[1]
                if cache is not None and cache.remote_cache is not None:
                    rc, key = cache.remote_cache
                    found[rc._get_key(key)] = f"{inductor_meta.get('kernel_name', '?')}, {len(configs)} configs"
            except Exception:  # noqa: BLE001 - a diagnostic only
                pass
            return got

        th.check_autotune_cache = check_autotune_cache
    except Exception:  # noqa: BLE001
        pass
    return found


def main() -> None:
    """Parses the arguments, trains on the GPU, prints the JSON report."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--ns", default="gpu")
    ap.add_argument("--run", default="")
    ap.add_argument("--save", action="store_true", help="also save the Mega-Cache as --run")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--dump", default="", help="save the first step's output and gradients to this file")
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "torch sees no CUDA device"}))
        sys.exit(77)
    svc = cachesvc.torch.install(a.url, a.ns, run=a.run or None)
    assert svc is not None, "cachesvc.torch.install failed"
    saved = record_autotune_saves(svc)
    kernels = record_autotune_kernels()
    torch.manual_seed(0)
    model = MLP().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    compiled = torch.compile(model, mode="max-autotune-no-cudagraphs")
    x = torch.randn(256, 512, device="cuda", generator=torch.Generator("cuda").manual_seed(1))
    digests: dict[str, str] = {}
    first = 0.0
    for i in range(a.steps):
        t = time.monotonic()
        opt.zero_grad()
        out = compiled(x)
        out.square().mean().backward()
        torch.cuda.synchronize()
        if i == 0:
            first = time.monotonic() - t
            digests = {f"grad.{n}": digest(p.grad) for n, p in model.named_parameters()}
            digests["out"] = digest(out)
            if a.dump:
                first_step = {f"grad.{n}": p.grad.detach().cpu() for n, p in model.named_parameters()}
                first_step["out"] = out.detach().cpu()
                torch.save(first_step, a.dump)
        opt.step()
    mega = cachesvc.torch.save(a.run) if a.save and a.run else None
    flushed = cachesvc.torch.flush(60)
    from torch._dynamo.utils import counters

    print(json.dumps({
        "device": torch.cuda.get_device_name(),
        "first_step_seconds": first,
        "process_seconds": time.monotonic() - T0,
        "inductor": dict(counters["inductor"]),
        "aot_autograd": dict(counters["aot_autograd"]),
        "stats": cachesvc.torch.stats(),
        "digests": digests,
        "misses": [f'{m.get("cache")} {m.get("torch_key")}' for m in cachesvc.torch.misses()],
        "mega_saved": mega,
        "autotune_saved": sorted(saved),
        "autotune_kernels": kernels,
        "flushed": flushed,
    }, default=str))


if __name__ == "__main__":
    main()
