"""One inference process over a sequence-length dynamic model, for the
shape-class test (tests_torch/test_shapes.py), run in a fresh interpreter
with its own empty TORCHINDUCTOR_CACHE_DIR.

The model mean-pools token features over the sequence (as a sentence
encoder does), compiled with ``dynamic=True``. Its FX graph is the same for
every sequence length, so torch's FX graph key is too, but Inductor's C++
reduction guards on the length: a float sum over more than 4096 elements is
generated with a chunked accumulator (``need_use_acc_helper`` in
``torch/_inductor/codegen/cpp.py``), so a graph compiled for 64 tokens holds
the guard ``s <= 4096`` and one compiled for 5000 the guard ``s > 4096``.

    python dynprog.py --url URL --ns NS --len L [--mode remote|redis|none]

``--mode redis``: stock torch's Redis backend at URL (``redis://...``)
instead of cachesvc.torch. Prints one JSON line: torch's FX graph and
AOTAutograd cache counters, cachesvc's counters, the output's digest and
the seconds of the first call.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import cachesvc.torch  # noqa: E402


class Pool(torch.nn.Module):
    """Embedding, a linear layer, ReLU, then the mean over the sequence."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(100, 16)
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """(batch, len) token ids -> (batch, 16) pooled features."""
        return self.lin(self.emb(tokens)).relu().mean(1)


def main() -> None:
    """Parses the arguments, runs one compiled call, prints the JSON report."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="")
    ap.add_argument("--ns", default="default")
    ap.add_argument("--len", type=int, required=True)
    ap.add_argument("--mode", default="remote", choices=["remote", "redis", "none"])
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if a.mode == "remote":
        assert cachesvc.torch.install(a.url, a.ns, timeout=5.0, breaker_cooldown=300) is not None
    elif a.mode == "redis":
        os.environ["TORCHINDUCTOR_REDIS_URL"] = a.url
        torch._inductor.config.fx_graph_remote_cache = True
        torch._functorch.config.enable_remote_autograd_cache = True
    torch.manual_seed(0)
    model = Pool()
    tokens = torch.randint(0, 100, (2, a.len), generator=torch.Generator().manual_seed(1))
    t0 = time.monotonic()
    with torch.no_grad():
        out = torch.compile(model, dynamic=True)(tokens)
    first = time.monotonic() - t0
    cachesvc.torch.flush(30)
    from torch._dynamo.utils import counters

    expect = model(tokens)
    print(json.dumps({
        "len": a.len,
        "first_call_seconds": first,
        "inductor": {k: v for k, v in counters["inductor"].items() if k.startswith("fxgraph")},
        "aot_autograd": {k: v for k, v in counters["aot_autograd"].items() if "cache" in k},
        "stats": cachesvc.torch.stats(),
        "close": bool(torch.allclose(out, expect, atol=1e-5)),
        "digest": hashlib.sha256(repr(out.flatten().tolist()).encode()).hexdigest(),
    }))


if __name__ == "__main__":
    main()
