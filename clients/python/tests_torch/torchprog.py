"""One training process for the torch tests and the benchmark (run in a fresh
interpreter, with its own TORCHINDUCTOR_CACHE_DIR).

It compiles a small two-block MLP (a graph break between the blocks, so each
block is its own Dynamo graph: one AOTAutograd entry and one forward plus one
backward FX graph per block), runs a few training steps, and prints one JSON
line: digests of outputs and gradients, torch's compile counters, cachesvc's
counters, the C++ compiler invocations (when $CACHESVC_CXX_LOG is set by a
counting wrapper) and timings.

    python torchprog.py --url URL --ns NS [--mode remote|none|mega-save|mega-load]
                        [--variant base|changed] [--run RUN] [--pause DIR]
                        [--leases] [--lease-wait S] [--lease-ttl S] [--barrier DIR]
                        [--compile-sleep S]

``--variant changed`` swaps the second block's activation (ReLU -> GELU): the
first block's graphs are unchanged. ``--pause DIR``: after the first step,
create DIR/ready and wait for DIR/go (the test kills the server meanwhile),
then train the changed variant's second block too (new graphs: lookups fail).
``--leases``: install with compile leases (``--lease-wait``: their
lease_wait; ``--lease-ttl``: their lease_ttl, else install's default). ``--barrier DIR``: after the
install, create DIR/ready-<pid> and wait for DIR/go before training (so
that processes start compiling together). ``--compile-sleep S``: each FX
graph's compile (Inductor's ``fx_codegen_and_compile``, called inside the
compile step the client's lease wrapper wraps) first sleeps S s: a compile
longer than a lease's TTL, without the CPU.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

T_START = time.monotonic()
import torch  # noqa: E402

import cachesvc.torch  # noqa: E402

T_IMPORT = time.monotonic() - T_START


class Block(torch.nn.Module):
    """Linear then an activation (ReLU, or GELU in the changed variant)."""

    def __init__(self, n_in: int, n_out: int, act: str) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(n_in, n_out)
        self.act = torch.nn.GELU() if act == "gelu" else torch.nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """act(lin(x))."""
        return self.act(self.lin(x))


class Model(torch.nn.Module):
    """Two blocks with a graph break between them: one Dynamo graph each."""

    def __init__(self, variant: str) -> None:
        super().__init__()
        self.block1 = Block(16, 32, "relu")
        self.block2 = Block(32, 8, "gelu" if variant == "changed" else "relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """block2(block1(x)), the graph broken in between."""
        x = self.block1(x)
        torch._dynamo.graph_break()
        return self.block2(x)


def digest(t: torch.Tensor) -> str:
    """sha256 of the exact values (float32 -> Python float repr is exact)."""
    return hashlib.sha256(repr(t.detach().cpu().flatten().tolist()).encode()).hexdigest()


def train(variant: str, steps: int) -> tuple[dict[str, str], float]:
    """Runs ``steps`` SGD steps of the compiled model; (digests, first-step seconds)."""
    torch.manual_seed(0)
    model = Model(variant)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    compiled = torch.compile(model)
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(1))
    first = 0.0
    out = torch.empty(0)
    for i in range(steps):
        t0 = time.monotonic()
        opt.zero_grad()
        out = compiled(x)
        out.square().mean().backward()
        if i == 0:
            first = time.monotonic() - t0
            grads = {f"grad.{n}": digest(p.grad) for n, p in model.named_parameters()}
            grads["out"] = digest(out)
        opt.step()
    grads["final.out"] = digest(out)
    return grads, first


def cxx_counts() -> dict[str, int]:
    """Invocations logged by the counting compiler wrapper: all, and those
    that compile a source file (the rest probe versions)."""
    path = os.environ.get("CACHESVC_CXX_LOG")
    if not path or not os.path.exists(path):
        return {}
    lines = Path(path).read_text().splitlines()
    compiles = [ln for ln in lines if any(a.endswith((".cpp", ".cc", ".c")) for a in ln.split())]
    return {"all": len(lines), "compiles": len(compiles)}


def wait_for(d: Path, ready: str) -> None:
    """Creates d/ready and waits (at most 120 s) for d/go."""
    (d / ready).touch()
    deadline = time.monotonic() + 120
    while not (d / "go").exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"torchprog: no go file in {d} within 120 s")
        time.sleep(0.01)


def slow_compiles(secs: float) -> None:
    """Makes each FX graph's compile sleep ``secs`` first (``_compile_fx_inner``
    looks ``fx_codegen_and_compile`` up by module attribute on each call)."""
    import torch._inductor.compile_fx as cfx

    orig = cfx.fx_codegen_and_compile

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(secs)
        return orig(*args, **kwargs)

    cfx.fx_codegen_and_compile = slow


def main() -> None:
    """Parses the arguments, trains, prints the JSON report."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="")
    ap.add_argument("--ns", default="default")
    ap.add_argument("--mode", default="remote", choices=["remote", "none", "mega-save", "mega-load"])
    ap.add_argument("--variant", default="base", choices=["base", "changed"])
    ap.add_argument("--run", default="")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--pause", default="")
    ap.add_argument("--leases", action="store_true")
    ap.add_argument("--lease-wait", type=float, default=60.0)
    ap.add_argument("--barrier", default="")
    ap.add_argument("--compile-sleep", type=float, default=0.0)
    ap.add_argument("--lease-ttl", type=float, default=None)
    a = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    t0 = time.monotonic()
    loaded = None
    if a.mode in ("remote", "mega-save"):
        svc = cachesvc.torch.install(a.url, a.ns, run=a.run or None, timeout=5.0, breaker_cooldown=300,
                                     leases=a.leases, lease_wait=a.lease_wait,
                                     **({"lease_ttl": a.lease_ttl} if a.lease_ttl else {}))
        assert svc is not None
    elif a.mode == "mega-load":
        info = cachesvc.torch.load(a.run, url=a.url, namespace=a.ns)
        loaded = None if info is None else {k: len(v) for k, v in info.artifacts.items()}
    setup_s = time.monotonic() - t0
    if a.compile_sleep:
        slow_compiles(a.compile_sleep)
    if a.barrier:
        wait_for(Path(a.barrier), f"ready-{os.getpid()}")

    result, first = train(a.variant, a.steps)
    after_pause = None
    if a.pause:
        wait_for(Path(a.pause), "ready")
        t1 = time.monotonic()
        more, _ = train("changed", a.steps)  # block2 changed: new graphs, server gone
        after_pause = {"seconds": time.monotonic() - t1, "digests": more}

    saved = None
    if a.mode == "mega-save":
        saved = cachesvc.torch.save(a.run)
    flushed = cachesvc.torch.flush(30)
    from torch._dynamo.utils import counters

    print(json.dumps({
        "digests": result,
        "first_step_seconds": first,
        "import_seconds": T_IMPORT,
        "setup_seconds": setup_s,
        "inductor": dict(counters["inductor"]),
        "aot_autograd": dict(counters["aot_autograd"]),
        "stats": cachesvc.torch.stats(),
        "misses": [{"cache": m["cache"], "explanation": m["explanation"],
                    "components": sorted(k for k in m["signature"] if k not in ("backend", "key", "cache", "format"))}
                   for m in cachesvc.torch.misses()],
        "cxx": cxx_counts(),
        "mega_loaded": loaded,
        "mega_saved": saved,
        "after_pause": after_pause,
        "flushed": flushed,
    }, default=str))


if __name__ == "__main__":
    main()
