"""torch.compile under ``torchrun --nproc_per_node=2`` (DDP, CPU, gloo) with
cachesvc.torch installed in every rank, as README "torchrun / several ranks
per host" describes: a cold job with leases compiles each graph once across
its ranks, a second job's ranks hit everything, every rank may call save()
without a warning, and the server counts the ranks of one CACHESVC_RUN as one
run. Real torchrun, real server; ~40 s on 2 cores."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from conftest import HERE, clean_env

PROG = HERE / "ddpprog.py"


def _job(url: str, ns: str, run: str | None, out: Path, *args: str,
         env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Runs ddpprog.py under torchrun with 2 ranks (CACHESVC_RUN=run unless
    None); their reports, by rank."""
    out.mkdir()
    e = clean_env({"CACHESVC_URL": url, "CACHESVC_NAMESPACE": ns, "OMP_NUM_THREADS": "1",
                   **({"CACHESVC_RUN": run} if run else {}), **(env or {})})
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(PROG), str(out), *args]
    res = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, f"torchrun exited {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-6000:]}"
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    for r in ranks:  # shown with -s, for README's numbers
        print(out.name, r["rank"], f"first step {r['first_step_seconds']:.1f}s", r["inductor"], r["stats"])
    return ranks


def _server_run(url: str, ns: str, run: str) -> dict[str, Any]:
    """The server's statistics of one run (GET /v1/stats)."""
    with urllib.request.urlopen(f"{url}/v1/stats?namespace={ns}", timeout=10) as r:
        runs = json.load(r)["runs"]
    return next(x for x in runs if x["run"] == run)


def _sum(ranks: list[dict[str, Any]], group: str, name: str) -> int:
    """The ranks' total of one torch counter."""
    return sum(r[group].get(name, 0) for r in ranks)


def test_torchrun_ranks_share_compiles_and_save_once(torch_server: Any, tmp_path: Path) -> None:
    url, ns = torch_server.url, "torchrun"
    # No CACHESVC_LEASES: under torchrun leases are on by default.
    cold = _job(url, ns, "ddp-cold", tmp_path / "cold", "--save")
    for r in cold:
        # Both ranks save the run's Mega-Cache: the second one's 409 is
        # expected under torchrun, counted and not warned (each rank's
        # blob holds the same graphs).
        assert [w for w in r["warnings"] if "cachesvc" in w] == [], r["warnings"]
        assert r["stats"]["errors"] == 0 and r["stats"]["put_errors"] == 0, r["stats"]
    st = [r["stats"] for r in cold]
    assert sum(s["mega_saved"] for s in st) == 1 and sum(s["mega_conflicts"] for s in st) == 1, st
    # 2 FX graphs (forward, backward), compiled once across the ranks: the
    # other rank waited on the lease and got the entry.
    assert _sum(cold, "inductor", "fxgraph_cache_miss") == 2, [r["inductor"] for r in cold]
    assert sum(s["leases_granted"] for s in st) == 2 and sum(s["lease_wait_hits"] for s in st) == 2, st
    # The server counts the job's ranks as one run, with the lookups they
    # made: a lease wait is a miss and then a wait hit there, one hit here.
    srv = _server_run(url, ns, "ddp-cold")
    assert srv["lookups"] == sum(s["lookups"] + s["lease_wait_hits"] for s in st), (srv, st)
    assert srv["hits"] == sum(s["hits"] for s in st), (srv, st)
    assert srv["misses"] - srv["wait_hits"] == sum(s["misses"] for s in st), (srv, st)

    # No CACHESVC_RUN: the ranks' default run id is torchrun's job id, so
    # the server still counts one run (it counted one per rank).
    warm = _job(url, ns, None, tmp_path / "warm")
    run = warm[0]["stats"]["run"]
    assert run.startswith("torchrun-") and warm[1]["stats"]["run"] == run, [r["stats"]["run"] for r in warm]
    for r in warm:
        assert r["inductor"].get("fxgraph_cache_miss", 0) == 0, r["inductor"]
        assert r["inductor"].get("fxgraph_cache_hit", 0) == 2, r["inductor"]
        assert r["stats"]["misses"] == 0 and r["stats"]["hits"] == r["stats"]["lookups"] > 0, r["stats"]
        assert [w for w in r["warnings"] if "cachesvc" in w] == [], r["warnings"]
    srv = _server_run(url, ns, run)
    assert srv["lookups"] == srv["hits"] == sum(r["stats"]["lookups"] for r in warm), srv


@pytest.mark.parametrize(("world_size", "level"), [("2", logging.INFO), ("", logging.WARNING), ("1", logging.WARNING)])
def test_a_second_save_of_one_run_is_counted_and_warned_only_outside_torchrun(
        torch_server: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        world_size: str, level: int) -> None:
    """Two saves of one run with other bytes (two ranks; or a lone process
    reusing a run id): the first blob is kept, the second counts as
    ``mega_conflicts``, and only a lone process warns."""
    import torch

    import cachesvc.torch as ct

    blobs = iter([b"rank 0's artifacts", b"rank 1's artifacts"])
    monkeypatch.setattr(torch.compiler, "save_cache_artifacts", lambda: (next(blobs), None))
    monkeypatch.setenv("WORLD_SIZE", world_size)
    run = f"mega-twice-{world_size or 'unset'}"
    assert ct.install(torch_server.url, "torchrun-unit", run=run) is not None
    try:
        with caplog.at_level(logging.INFO, logger="cachesvc.torch"):
            first, second = ct.save(run), ct.save(run)
        st = ct.stats()
    finally:
        ct.uninstall()
    assert first is not None and first == second
    assert (st["mega_saved"], st["mega_conflicts"]) == (1, 1), st
    said = [r for r in caplog.records if "already exists" in r.getMessage()]
    assert [r.levelno for r in said] == [level], [(r.levelname, r.getMessage()) for r in said]


@pytest.mark.parametrize(("world_size", "variable", "want"), [
    ("2", None, True),  # a torchrun rank: on
    ("2", "0", False),  # unless turned off
    ("", None, False),  # a lone process: off
    ("1", None, False),
    ("", "1", True),
])
def test_leases_default_on_in_a_torchrun_rank(torch_server: Any, monkeypatch: pytest.MonkeyPatch,
                                              world_size: str, variable: str | None, want: bool) -> None:
    """install() with no leases argument takes compile leases in one of
    several ranks (ranks miss every graph together), and otherwise as
    CACHESVC_LEASES says (off when unset)."""
    import cachesvc.torch as ct

    monkeypatch.setenv("WORLD_SIZE", world_size)
    if variable is None:
        monkeypatch.delenv("CACHESVC_LEASES", raising=False)
    else:
        monkeypatch.setenv("CACHESVC_LEASES", variable)
    svc = ct.install(torch_server.url, "torchrun-unit")
    try:
        assert svc is not None and (svc.leasebook is not None) == want
    finally:
        ct.uninstall()
