"""One process of the autotune-record test (tests_torch/test_autotune.py), run
in a fresh interpreter with its own TORCHINDUCTOR_CACHE_DIR.

There is no GPU here, so instead of launching a Triton kernel this calls
torch's own autotune cache exactly as ``CachingAutotuner.run`` does on a
kernel's first launch (torch 2.15, torch/_inductor/runtime/triton_heuristics.py):
``check_autotune_cache`` (as ``cached_autotune`` does) yields the kernel's
``AutotuneCache``, whose ``save`` is the autotuner's ``save_cache_hook``;
``autotune_to_one_config`` saves the benchmarked winner, then
``coordinate_descent_tuning`` saves the config it tuned from there under the
same key.

    python autotuneprog.py --url URL --ns NS save --torch 2.15|2.11 [--exit|--sigterm]
    python autotuneprog.py --url URL --ns NS read

``save`` prints cachesvc's counters after a flush (with ``--exit``, before
exiting without one: the client's exit hook must write what it holds; with
``--sigterm`` it prints nothing and dies by its own SIGTERM); ``read`` looks the kernel
up as a second process would (``check_autotune_cache``) and prints the config
torch would launch. One JSON line either way.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402, F401 - torch first, as in a training job
from torch._inductor.runtime.triton_compat import Config  # noqa: E402
from torch._inductor.runtime.triton_heuristics import check_autotune_cache  # noqa: E402

import cachesvc.torch  # noqa: E402

# What Inductor bakes into a kernel's source (inductor_meta_from_config plus
# the kernel's own fields); backend_hash is Triton's, fixed here.
INDUCTOR_META = {
    "autotune_local_cache": True,
    "autotune_remote_cache": True,
    "backend_hash": "5" * 64,
    "bundled_autotune_remote_cache": False,
    "coordinate_descent_tuning": True,
    "is_fbcode": False,
    "is_hip": None,
}
# A kernel's file is named by the hash of its source; only the name counts.
KERNEL_FILE = "cq3kernel7rjd2xgq5vukqgzbmcw5uv6jm4jvwk3bqkc2wy5tl2k4a.py"
# The pre-coordesc winner, and the config coordinate descent moved to.
WINNER = {"XBLOCK": 64}
TUNED = {"XBLOCK": 256}


def configs() -> list:
    """The kernel's candidate configs, as its decorator lists them."""
    return [Config({"XBLOCK": 64}, num_warps=4, num_stages=1),
            Config({"XBLOCK": 128}, num_warps=4, num_stages=1),
            Config({"XBLOCK": 32}, num_warps=2, num_stages=1)]


def kernel_file() -> str:
    d = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]) / KERNEL_FILE[1:3]
    d.mkdir(parents=True, exist_ok=True)
    return str(d / KERNEL_FILE)


def save(torch_version: str, flush: str) -> dict:
    """Saves as a first launch does: the winner, then coordesc's config."""
    _, cache, info = check_autotune_cache(configs(), kernel_file(), dict(INDUCTOR_META))
    assert cache is not None and info.get("autotune_cache_state") == "miss", info
    hook = cache.save  # cached_autotune: save_cache_hook=autotune_cache and autotune_cache.save
    winner = Config(dict(WINNER), num_warps=4, num_stages=1)
    if torch_version == "2.15":
        # autotune_to_one_config (2.15): found_by_coordesc is whether coordesc is on.
        hook(winner, 40_000_000, found_by_coordesc=INDUCTOR_META["coordinate_descent_tuning"],
             triton_cache_hash="9" * 52)
    else:
        hook(winner, 40_000_000)  # autotune_to_one_config (2.11)
    # coordinate_descent_tuning: a new Config, marked, saved under the same key.
    tuned = Config(dict(TUNED), num_warps=8, num_stages=1)
    tuned.found_by_coordesc = True
    hook(tuned, 40_000_000 + 500_000_000, found_by_coordesc=True)
    if flush == "sigterm":
        # A scheduler stopping the job right after the launch: the record
        # is still held (it settles after 30 quiet seconds).
        os.kill(os.getpid(), signal.SIGTERM)
        signal.pause()
    if flush == "flush":
        assert cachesvc.torch.flush(60)
    return {"stats": cachesvc.torch.stats()}


def read() -> dict:
    """The config a second process launches: check_autotune_cache's answer."""
    got, _, info = check_autotune_cache(configs(), kernel_file(), dict(INDUCTOR_META))
    out: dict = {"state": info.get("autotune_cache_state"), "stats": cachesvc.torch.stats()}
    if len(got) == 1:
        c = got[0]
        out.update(kwargs=dict(c.kwargs), num_warps=c.num_warps,
                   found_by_coordesc=bool(getattr(c, "found_by_coordesc", False)))
    return out


def main() -> None:
    """Parses the arguments, runs one role, prints the JSON line."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--ns", required=True)
    ap.add_argument("role", choices=["save", "read"])
    ap.add_argument("--torch", default="2.15", choices=["2.15", "2.11"],
                    help="whose autotune_to_one_config to replay")
    ap.add_argument("--exit", action="store_true", help="save: no flush, leave it to the exit hook")
    ap.add_argument("--sigterm", action="store_true", help="save: no flush, SIGTERM to itself")
    a = ap.parse_args()
    svc = cachesvc.torch.install(a.url, a.ns, caches=["autotune"])
    assert svc is not None, "cachesvc.torch.install failed"
    print(json.dumps(save(a.torch, "sigterm" if a.sigterm else "exit" if a.exit else "flush") if a.role == "save" else read()))


if __name__ == "__main__":
    main()
