"""One rank of a tiny DDP training job for test_torchrun.py, started by
``torchrun --nproc_per_node=N`` (CPU, gloo) as an ML engineer writes it:
``cachesvc.torch.install()`` at the top (settings from ``CACHESVC_*``), the
module compiled and wrapped in DDP, a few steps, and every rank calling
``cachesvc.torch.save(run)`` naively.

    torchrun --standalone --nproc_per_node=2 ddpprog.py OUTDIR [--save]

Each rank writes OUTDIR/rank<RANK>.json: torch's compile counters, cachesvc's
counters, the first step's seconds and the warnings logged (by any logger).
``TORCHINDUCTOR_CACHE_DIR`` is per rank (OUTDIR/inductor-<RANK>) unless
``DDPPROG_SHARED_CACHE_DIR`` names one directory for all ranks.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

OUT = Path(sys.argv[1])
RANK = int(os.environ["RANK"])
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.environ.get("DDPPROG_SHARED_CACHE_DIR") or str(OUT / f"inductor-{RANK}")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import cachesvc.torch  # noqa: E402

WARNINGS: list[str] = []


class _Record(logging.Handler):
    """Keeps every warning line (cachesvc's or torch's) for the report."""

    def emit(self, record: logging.LogRecord) -> None:
        WARNINGS.append(f"{record.levelname}:{record.name}:{record.getMessage()}")


def main() -> None:
    """Installs, trains 3 steps under DDP, saves if asked, writes the report."""
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger().addHandler(_Record(logging.WARNING))
    assert cachesvc.torch.install() is not None
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    # torch.compile(DDP(model)) would compile nothing here (torch 2.15):
    # Dynamo breaks in DDP's forward and starts again only in a frame outside
    # torch's files, and an nn.Sequential's forward is inside them. Compiled
    # inside DDP, the module compiles on every torch (DDPOptimizer splits it
    # at DDP's buckets all the same).
    ddp = DDP(torch.compile(model))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(RANK))
    first = 0.0
    for i in range(3):
        t0 = time.monotonic()
        opt.zero_grad()
        ddp(x).square().mean().backward()
        opt.step()
        if i == 0:
            first = time.monotonic() - t0
    saved = cachesvc.torch.save() if "--save" in sys.argv else None
    cachesvc.torch.flush(30)
    from torch._dynamo.utils import counters

    (OUT / f"rank{RANK}.json").write_text(json.dumps({
        "rank": RANK, "first_step_seconds": first, "inductor": dict(counters["inductor"]),
        "aot_autograd": dict(counters["aot_autograd"]), "stats": cachesvc.torch.stats(),
        "warnings": WARNINGS, "saved": saved}, default=str))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
