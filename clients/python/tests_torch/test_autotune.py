"""Autotune records in cachesvc.torch: the config a process tuned last for a
kernel is the one stored.

On a kernel's first launch torch saves its autotune record twice under one
key: ``autotune_to_one_config`` saves the benchmarked winner, then
``coordinate_descent_tuning`` saves the config it tuned from there
(triton_heuristics.py, torch 2.15). torch's own caches keep the last write;
cachesvc entries are immutable, so the client holds each record until it has
settled and writes it once.

There is no GPU here: the GPU run (scripts/gpu-check.sh) is replaced by
calling torch's real save hook (``AutotuneCache.save``) exactly as
triton_heuristics does (tests_torch/autotuneprog.py), against a real server;
a second fresh process then reads the kernel back through torch's real read
path (``check_autotune_cache`` -> ``AutotuneCache.read_best`` ->
``_load_cached_autotuning``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cachesvc import Client
from cachesvc._failopen import Breaker
from cachesvc.torch._autotune import AutotuneHold
from cachesvc.torch._service import Service
from conftest import HERE, clean_env

PROG = HERE / "autotuneprog.py"


def _run(url: str, ns: str, cache_dir: Path, *args: str) -> dict[str, Any]:
    cache_dir.mkdir()
    res = subprocess.run([sys.executable, str(PROG), "--url", url, "--ns", ns, *args],
                         env=clean_env({"TORCHINDUCTOR_CACHE_DIR": str(cache_dir)}),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"autotuneprog {list(args)} exited {res.returncode}\n{res.stderr[-4000:]}"
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("torch_version, flush", [("2.15", "flush"), ("2.11", "exit")])
def test_second_process_gets_the_coordesc_config(torch_server: Any, tmp_path: Path, torch_version: str,
                                                 flush: str) -> None:
    """2.15 saves the winner with found_by_coordesc already true (a host that
    loaded it would skip coordesc and launch the untuned config); 2.11 saved
    it without (a host that loaded it re-ran coordesc and was refused again).
    With ``exit`` the first process exits holding the record, unflushed."""
    ns = f"autotune-{torch_version.replace('.', '')}"
    a = _run(torch_server.url, ns, tmp_path / "a", "save", "--torch", torch_version,
             *(["--exit"] if flush == "exit" else []))
    b = _run(torch_server.url, ns, tmp_path / "b", "read")
    assert b["state"] == "hit", b
    # B launches A's final config and skips coordinate descent.
    assert (b["kwargs"], b["num_warps"], b["found_by_coordesc"]) == ({"XBLOCK": 256}, 8, True), b
    s = a["stats"]
    written = 1 if flush == "flush" else 0  # else written by the exit hook, after these counters
    assert (s["puts"], s["put_created"], s["put_conflicts"]) == (written, written, 0), s
    assert s["autotune_superseded"] == 1 and s["autotune_held"] == 1 - written, s


def test_record_held_at_sigterm_is_written(torch_server: Any, tmp_path: Path) -> None:
    """A process stopped by SIGTERM (no handler of its own) right after a
    kernel's first launch still writes the record it held, and still dies
    by SIGTERM (Python's default kills without running atexit)."""
    (tmp_path / "a").mkdir()
    res = subprocess.run([sys.executable, str(PROG), "--url", torch_server.url, "--ns", "autotune-sigterm", "save",
                          "--sigterm"], env=clean_env({"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "a")}),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == -signal.SIGTERM, f"exited {res.returncode}\n{res.stderr[-4000:]}"
    b = _run(torch_server.url, "autotune-sigterm", tmp_path / "b", "read")
    assert b["state"] == "hit", f"the record held at SIGTERM is not on the server: {b}"
    assert (b["kwargs"], b["num_warps"]) == ({"XBLOCK": 256}, 8), b


# ---- the settle rules (no torch needed) --------------------------------------------

def _key(kernel: str) -> str:
    """A per-kernel autotune key: ``pt2:<digest of the configs>::<digest of the file>:c1``."""
    return f"pt2:{kernel * 64}::{'f' * 64}:c1"


@pytest.mark.parametrize("ops, want", [
    # (key, thread, now) -> (superseded, settled keys)
    ([("a", 1, 0.0), ("a", 1, 0.5)], [(False, []), (True, [])]),  # coordesc's save replaces the winner
    ([("a", 1, 0.0), ("b", 1, 1.0)], [(False, []), (False, ["a"])]),  # the thread moved on: a is final
    ([("a", 1, 0.0), ("b", 2, 0.1), ("a", 1, 0.5)], [(False, []), (False, []), (True, [])]),  # another thread
    ([("a", 1, 0.0), ("b", 2, 0.1), ("c", 3, 0.2)], [(False, []), (False, []), (False, ["a"])]),  # cap 2: oldest
    ([("a", 1, 0.0), ("b", 2, 0.1), ("a", 1, 0.2), ("c", 3, 0.3)],
     [(False, []), (False, []), (True, []), (False, ["b"])]),  # a saved again is no longer the oldest
])
def test_hold_settles(ops: list[tuple[str, int, float]], want: list[tuple[bool, list[str]]]) -> None:
    h = AutotuneHold(max_items=2, quiet=30.0)
    got = []
    for key, thread, now in ops:
        superseded, settled = h.hold(key, f"{key}@{now}".encode(), thread, now)
        got.append((superseded, [k for k, _ in settled]))
    assert got == want


def test_hold_quiet_period_and_drain() -> None:
    h = AutotuneHold(max_items=8, quiet=30.0)
    h.hold("a", b"a1", 1, 0.0)
    h.hold("b", b"b1", 2, 10.0)
    h.hold("a", b"a2", 1, 20.0)  # saved again: quiet from 20 s on
    assert h.next_due() == 40.0  # b's
    assert h.due(39.9) == []
    assert h.due(40.0) == [("b", b"b1")]
    assert h.due(50.0) == [("a", b"a2")] and len(h) == 0 and h.next_due() is None
    h.hold("c", b"c1", 1, 60.0)
    assert h.drain() == [("c", b"c1")] and len(h) == 0


def _service(url: str, ns: str, settle: float = 30.0) -> Service:
    # Writes in the caller's thread: what a save settles is written when it returns.
    return Service(Client(url, namespace=ns), timeout=10.0, put_timeout=None, breaker=Breaker(3, 30.0),
                   warn_interval=60.0, components=None, background_uploads=False, upload_queue_bytes=1 << 20,
                   flush_at_exit=10.0, autotune_settle=settle)


def _counts(svc: Service) -> tuple[int, int, int, int]:
    s = svc.stats()
    return s["puts"], s["put_conflicts"], s["autotune_superseded"], s["autotune_held"]


def test_service_writes_a_record_once_settled(torch_server: Any) -> None:
    svc = _service(torch_server.url, "autotune-rules")
    svc.put(_key("a"), b'{"XBLOCK": 64, "time_taken_ms": 40}')
    svc.put(_key("a"), b'{"XBLOCK": 256, "time_taken_ms": 540}')  # coordesc: same kernel
    assert _counts(svc) == (0, 0, 1, 1)
    # Another thread tuning another kernel meanwhile settles nothing.
    t = threading.Thread(target=svc.put, args=(_key("b"), b'{"XBLOCK": 8}'))
    t.start()
    t.join()
    assert _counts(svc) == (0, 0, 1, 2)
    svc.put(_key("c"), b'{"XBLOCK": 32}')  # this thread's next kernel: a is final, written now
    assert _counts(svc) == (1, 0, 1, 2)
    assert svc.flush(30)  # the rest at flush (exit)
    assert _counts(svc) == (3, 0, 1, 0)
    # The next process reads the tuned config.
    assert _service(torch_server.url, "autotune-rules").get(_key("a")) == b'{"XBLOCK": 256, "time_taken_ms": 540}'


def test_service_writes_a_quiet_record_without_a_flush(torch_server: Any) -> None:
    """The last kernel a thread tunes has no successor: the settle thread
    writes it after the quiet period (a long job must not hold it until exit)."""
    svc = _service(torch_server.url, "autotune-quiet", settle=0.2)
    svc.put(_key("d"), b'{"XBLOCK": 64}')
    deadline = time.monotonic() + 60
    while _counts(svc)[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _counts(svc) == (1, 0, 0, 0)
