"""Two shape classes of one FX graph key across processes, real torch 2.15
(CPU) and a real server (tests_torch/dynprog.py).

torch keys an FX graph and an AOTAutograd entry without the guards on their
symbolic sizes; a remote cache holds one value per key and cachesvc entries
are immutable. A model mean-pooling over a dynamic sequence length compiles
to one key for every length, but its graph for 64 tokens guards ``s <= 4096``
and the one for 5000 tokens ``s > 4096``. Before ``_candidates``, every
process of the second class failed the first class's guards, compiled again
and had its write refused. About 35 s on 2 loaded cores (three processes).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import HERE, clean_env

PROG = HERE / "dynprog.py"


def dyn(url: str, ns: str, length: int, tmp: Path) -> dict[str, Any]:
    """dynprog.py in a fresh interpreter with an empty Inductor cache: only the
    remote tier can hit."""
    d = tmp / f"inductor-{length}-{len(list(tmp.iterdir()))}"
    d.mkdir()
    res = subprocess.run([sys.executable, str(PROG), "--url", url, "--ns", ns, "--len", str(length)],
                         env=clean_env({"TORCHINDUCTOR_CACHE_DIR": str(d)}), capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, f"dynprog exited {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["close"], out
    return out


def fx_lookups(out: dict[str, Any]) -> int:
    """Requests this process sent for FX graphs (hits, misses and rejected hits)."""
    c = out["stats"]["by_cache"].get("fx-graph-v1", {})
    return int(c.get("hits", 0) + c.get("misses", 0) + c.get("guard_misses", 0))


def test_second_shape_class_is_stored_as_a_candidate(torch_server: Any, tmp_path: Path) -> None:
    url, ns = torch_server.url, "shapes"
    a = dyn(url, ns, 64, tmp_path)
    b = dyn(url, ns, 5000, tmp_path)
    c = dyn(url, ns, 5000, tmp_path)

    # C, of B's class: the candidates B stored hold, nothing compiles (before,
    # C failed A's guards and compiled again, as every later process would).
    assert c["inductor"].get("fxgraph_cache_hit") == 1 and "fxgraph_cache_miss" not in c["inductor"], c
    assert c["aot_autograd"].get("autograd_cache_hit") == 1, c
    assert c["digest"] == b["digest"]
    s = c["stats"]
    assert (s["guard_misses"], s["puts"], fx_lookups(c)) == (2, 0, 2), s

    assert a["inductor"] == {"fxgraph_cache_miss": 1}, a
    assert fx_lookups(a) == 1, a["stats"]
    # B: A's graph and AOTAutograd entry failed its guards: it compiled and
    # stored both as the key's second candidates; a rejected value is no hit.
    assert b["inductor"].get("fxgraph_cache_miss") == 1, b
    s = b["stats"]
    assert (s["guard_misses"], s["candidates_written"], s["put_conflicts"]) == (2, 2, 0), s
    assert s["by_cache"]["fx-graph-v1"].get("hits", 0) == 0, s
