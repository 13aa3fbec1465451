"""cachesvc.torch against real torch 2.15 (CPU) and a real `cachesvc serve`.

Every training process is a fresh interpreter with its own empty
TORCHINDUCTOR_CACHE_DIR (see conftest.py); compiles are counted only with
torch._dynamo.utils.counters, C++ compiler runs with a counting wrapper.
"""

from __future__ import annotations

import getpass
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import PY_DIR, clean_env, finish

FX, AOT, CPP = "fx-graph-v1", "autograd-experimental", "inductor-cpp"


def _cli(url: str, ns: str, *args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    env = clean_env({"TORCHINDUCTOR_CACHE_DIR": str(cache_dir)})
    return subprocess.run([sys.executable, "-m", "cachesvc.torch", *args, "--url", url, "--namespace", ns],
                          env=env, capture_output=True, text=True, timeout=300, cwd=PY_DIR)


def test_process_a_compiles_and_writes(process_a: Any) -> None:
    a = process_a.out
    assert a["inductor"].get("fxgraph_cache_miss") == 4, a["inductor"]  # 2 blocks x (forward, backward)
    assert a["aot_autograd"].get("autograd_cache_miss") == 2, a["aot_autograd"]
    s = a["stats"]
    assert s["errors"] == 0 and s["put_errors"] == 0 and s["put_dropped"] == 0, s
    assert s["by_cache"][FX]["misses"] == 4 and s["by_cache"][FX]["puts"] == 4, s["by_cache"]
    assert s["by_cache"][AOT]["puts"] == 2, s["by_cache"]
    assert s["by_cache"][CPP]["puts"] >= 4, s["by_cache"]  # the kernels' libraries
    assert s["compile_seconds_written"] > 0  # torch's time_taken_ms, sent as X-Compile-Seconds
    # Every compile happened in the first step. The FX graphs' time_taken_ms
    # includes their kernels' C++ builds, which are stored with their own
    # seconds too: the FX entries carry only the rest, or the dashboard would
    # count the g++ time twice (it claimed ~1.7x the first step). The margin
    # allows for builds that ran in parallel in Inductor's thread pool.
    assert s["compile_seconds_written"] <= 1.25 * a["first_step_seconds"], (s["compile_seconds_written"],
                                                                            a["first_step_seconds"])
    assert s["components_captured"] >= 6  # 4 FX graphs + 2 AOTAutograd graphs
    # A miss is compared only with entries of its own kind: block 2's C++
    # libraries missed after block 1's FX graphs were stored, and were
    # explained as "torch cache kind, FX graph, ... differ" from an FX graph.
    for m in a["misses"]:
        ex = m["explanation"] or {}
        assert "cache" not in ex.get("reason", "").split("+"), m
        assert all(d["component"] != "cache" for n in ex.get("nearest", []) for d in n["diffs"]), m
    assert a["cxx"]["compiles"] >= 4, a["cxx"]
    assert a["mega_saved"], "process A saved no Mega-Cache"
    assert a["flushed"] is True
    assert process_a.warnings() == [], process_a.stderr[-3000:]


def test_process_b_hits_everything_and_runs_no_compiler(torch_server: Any, run_torch: Any, process_a: Any) -> None:
    b = run_torch(torch_server.url, "ab")
    o = b.out
    assert o["inductor"].get("fxgraph_cache_hit") == 4 and "fxgraph_cache_miss" not in o["inductor"], o["inductor"]
    assert o["aot_autograd"].get("autograd_cache_hit") == 2, o["aot_autograd"]
    assert "autograd_cache_miss" not in o["aot_autograd"], o["aot_autograd"]
    s = o["stats"]
    assert s["misses"] == 0 and s["errors"] == 0 and s["hits"] == s["lookups"] > 0, s
    assert s["puts"] == 0, s
    assert s["compile_seconds_saved"] > 0, s
    assert o["cxx"]["compiles"] == 0, o["cxx"]  # the libraries came from the server
    assert o["digests"] == process_a.out["digests"]  # outputs and gradients bit-identical
    assert o["first_step_seconds"] < process_a.out["first_step_seconds"]


def test_other_user_or_tmpdir_still_gets_the_libraries(torch_server: Any, run_torch: Any, process_a: Any,
                                                      tmp_path: Path) -> None:
    # Inductor compiles kernels with -include of a precompiled header under
    # $TMPDIR/torchinductor_$USER (not TORCHINDUCTOR_CACHE_DIR): a job with its
    # own TMPDIR (as batch schedulers set) or another user missed those
    # kernels' libraries and ran g++ for each.
    b = run_torch(torch_server.url, "ab", env={"TMPDIR": str(tmp_path)})
    o = b.out
    assert o["inductor"].get("fxgraph_cache_hit") == 4, o["inductor"]
    assert "misses" not in o["stats"]["by_cache"]["inductor-cpp"], o["stats"]["by_cache"]
    assert o["cxx"]["compiles"] == 0, o["cxx"]
    assert o["digests"] == process_a.out["digests"]
    assert (tmp_path / f"torchinductor_{getpass.getuser()}").is_dir()  # torch did use the other TMPDIR


def test_changed_layer_misses_only_its_graphs(torch_server: Any, run_torch: Any, process_a: Any) -> None:
    c = run_torch(torch_server.url, "ab", "--variant", "changed").out
    # block1 is unchanged: its forward and backward graphs hit; block2's miss.
    assert c["inductor"].get("fxgraph_cache_hit") == 2 and c["inductor"].get("fxgraph_cache_miss") == 2, c["inductor"]
    assert c["aot_autograd"].get("autograd_cache_hit") == 1, c["aot_autograd"]
    assert c["aot_autograd"].get("autograd_cache_miss") == 1, c["aot_autograd"]
    fx_misses = [m for m in c["misses"] if m["cache"] == FX]
    assert len(fx_misses) == 2, c["misses"]
    for m in fx_misses:
        assert {"graph", "inductor_config", "torch_version", "device"} <= set(m["components"]), m
        exp = m["explanation"]
        assert exp["reason"] == "graph", exp
        assert "FX graph" in exp["summary"], exp
        diffs = {d["component"] for d in exp["nearest"][0]["diffs"]}
        assert diffs == {"graph"}, exp  # versions, config and device are the same


def test_server_killed_mid_run_training_continues(start_server: Any, run_torch: Any) -> None:
    srv = start_server()
    pause = Path(srv.data) / "pause"
    pause.mkdir()
    p = run_torch(srv.url, "kill", "--pause", str(pause), wait=False)
    deadline = time.monotonic() + 240
    while not (pause / "ready").exists():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, "the training process never finished its first step"
        time.sleep(0.1)
    srv.kill()  # SIGKILL: connections refused from now on
    (pause / "go").touch()
    out, err = p.communicate(timeout=240)
    r = finish(p.returncode, out, err, p.cache_dir)
    o = r.out
    assert o["after_pause"] is not None and o["after_pause"]["digests"]
    # The second model's new graphs compiled without the server ...
    assert o["inductor"].get("fxgraph_cache_miss", 0) >= 6, o["inductor"]
    s = o["stats"]
    assert s["errors"] >= 1, s
    assert s["breaker_open"] is True, s
    # ... with exactly one warning (the first failure; later ones are rate-limited).
    assert len(r.warnings()) == 1, r.warnings()
    assert "failed" in r.warnings()[0] and "compiling without the shared cache" in r.warnings()[0]


def test_mega_cache_warm_then_nothing_compiles(torch_server: Any, run_torch: Any, process_a: Any,
                                               tmp_path: Path) -> None:
    d = tmp_path / "inductor"
    d.mkdir()
    info = _cli(torch_server.url, "ab", "info", "mega-a", cache_dir=d)
    assert info.returncode == 0, info.stderr
    assert "present" in info.stdout
    # What a launcher runs before the job: the Go CLI drives this
    # interpreter's `python -m cachesvc.torch load`.
    res = subprocess.run([torch_server.binary, "warm", "--torch", "--run", "mega-a", "--server", torch_server.url,
                          "--ns", "ab", "--python", sys.executable, "--torch-cache-dir", str(d)],
                         env=clean_env(), capture_output=True, text=True, timeout=300, cwd=PY_DIR)
    assert res.returncode == 0, (res.stdout, res.stderr)
    assert "loaded" in res.stdout, res.stdout
    t = run_torch(torch_server.url, "ab", cache_dir=d).out
    # FX graphs and AOTAutograd entries all come from the local caches the blob filled.
    assert t["inductor"].get("fxgraph_cache_hit") == 4 and "fxgraph_cache_miss" not in t["inductor"], t["inductor"]
    assert t["aot_autograd"].get("autograd_cache_hit") == 2, t["aot_autograd"]
    by = t["stats"]["by_cache"]
    assert FX not in by and AOT not in by, by  # no remote FX/AOTAutograd lookups at all
    assert t["cxx"]["compiles"] == 0, t["cxx"]
    assert t["digests"] == process_a.out["digests"]


def test_cli_missing_run_and_usage(torch_server: Any, tmp_path: Path) -> None:
    miss = _cli(torch_server.url, "ab", "load", "no-such-run", cache_dir=tmp_path)
    assert miss.returncode == 1, (miss.stdout, miss.stderr)
    assert "no Mega-Cache blob in namespace ab " in miss.stdout, miss.stdout  # where it looked
    assert list(tmp_path.iterdir()) == []  # nothing was written
    usage = subprocess.run([sys.executable, "-m", "cachesvc.torch", "load"], env=clean_env(),
                           capture_output=True, text=True, timeout=120, cwd=PY_DIR)
    assert usage.returncode == 2 and "no run id" in usage.stderr
    helptext = subprocess.run([sys.executable, "-m", "cachesvc.torch", "--help"], env=clean_env(),
                              capture_output=True, text=True, timeout=60, cwd=PY_DIR)
    assert helptext.returncode == 0
    for word in ("exit codes:", "CACHESVC_URL", "TORCHINDUCTOR_CACHE_DIR", "load RUN"):
        assert word in helptext.stdout


def test_no_url_installs_nothing(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import cachesvc.torch

    monkeypatch.delenv("CACHESVC_URL", raising=False)
    with caplog.at_level("WARNING", logger="cachesvc.torch"):
        assert cachesvc.torch.install() is None
    assert "no server URL" in caplog.text
    assert cachesvc.torch.stats() == {}
