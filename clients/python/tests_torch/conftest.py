"""Fixtures of the torch suite: a real `cachesvc serve` (the `Server` of
clients/python/tests/conftest.py), a counting C++ compiler wrapper, and
training processes (tests_torch/torchprog.py) each in a fresh interpreter with
its own empty TORCHINDUCTOR_CACHE_DIR.

A fresh-process compile of the tiny model takes ~20 s on 2 cores, so process A
(the cold compile that fills the server) runs once per session and the tests
that only need its entries share it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

HERE = Path(__file__).resolve().parent
PY_DIR = HERE.parent
ROOT = PY_DIR.parents[1]
sys.path.insert(0, str(PY_DIR))


def _load_base_conftest() -> Any:
    """clients/python/tests/conftest.py under its own module name (pytest
    already registers a module called ``conftest``: this file)."""
    spec = importlib.util.spec_from_file_location("cachesvc_tests_conftest", PY_DIR / "tests" / "conftest.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_base = _load_base_conftest()
Server, free_port, sigstop = _base.Server, _base.free_port, _base.sigstop

PROG = HERE / "torchprog.py"


# The base suite's session fixtures, shared rather than redefined: one
# build of the binary and one compiled-plugin cache per session.
cachesvc_binary = _base.cachesvc_binary
wasm_cache = _base.wasm_cache


@pytest.fixture(scope="session")
def start_server(cachesvc_binary: str, wasm_cache: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """A factory of ready servers with empty data directories; all stopped at the end."""
    servers: list[Any] = []

    def start() -> Any:
        s = Server(cachesvc_binary, tmp_path_factory.mktemp("data"), extra=["--wasm-cache", wasm_cache])
        servers.append(s)
        return s.wait_ready()

    yield start
    for s in servers:
        s.stop()


@pytest.fixture(scope="session")
def torch_server(start_server: Any) -> Any:
    """The session's shared server; tests keep apart by namespace."""
    return start_server()


@pytest.fixture(scope="session")
def cxx_wrapper(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A `g++` that logs each invocation's arguments to $CACHESVC_CXX_LOG and
    runs the real compiler (torch reads $CXX into torch._inductor.config.cpp.cxx
    when it is imported)."""
    real = shutil.which(os.environ.get("CXX") or "g++") or shutil.which("c++")
    if real is None:
        pytest.fail("no C++ compiler: install g++ (torch.compile on CPU needs one)")
    d = tmp_path_factory.mktemp("cxx")
    w = d / "g++"  # the name keeps torch's compiler detection (gcc flavour)
    w.write_text(f'#!/bin/sh\nprintf \'%s\\n\' "$*" >> "${{CACHESVC_CXX_LOG:-/dev/null}}"\nexec {real} "$@"\n')
    w.chmod(0o755)
    return str(w)


@dataclass
class Proc:
    """A finished training process: its JSON result, stderr and cache dir."""

    out: dict[str, Any]
    stderr: str
    cache_dir: Path

    def warnings(self) -> list[str]:
        """cachesvc's warning lines in the process's stderr."""
        return [ln for ln in self.stderr.splitlines() if ln.startswith("WARNING:cachesvc")]


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child: no inherited TORCHINDUCTOR_* or CACHESVC_*
    settings, this checkout's client on PYTHONPATH."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "CACHESVC_", "TORCH_LOGS"))}
    e["PYTHONPATH"] = str(PY_DIR) + os.pathsep + e.get("PYTHONPATH", "")
    if extra:
        e.update(extra)
    return e


@pytest.fixture(scope="session")
def run_torch(cxx_wrapper: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """run_torch(url, ns, *args, cache_dir=None, wait=True, env=None) runs
    torchprog.py in a fresh interpreter with an empty cache dir (or
    ``cache_dir``), the counting compiler and any ``env`` added; returns a
    Proc, or the Popen with ``wait=False``."""

    def run(url: str, ns: str, *args: str, cache_dir: Path | None = None, wait: bool = True,
            timeout: float = 300, env: dict[str, str] | None = None) -> Any:
        d = cache_dir or tmp_path_factory.mktemp("inductor")
        env = clean_env({"TORCHINDUCTOR_CACHE_DIR": str(d), "CXX": cxx_wrapper,
                         "CACHESVC_CXX_LOG": str(d / "cxx.log"), **(env or {})})
        cmd = [sys.executable, str(PROG), "--url", url, "--ns", ns, *args]
        if not wait:
            p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            p.cache_dir = d  # type: ignore[attr-defined]
            return p
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        return finish(res.returncode, res.stdout, res.stderr, d, args)

    return run


def finish(rc: int, stdout: str, stderr: str, cache_dir: Path, args: Any = ()) -> Proc:
    """A Proc from a finished torchprog run; fails with its output if it failed."""
    if rc != 0:
        raise AssertionError(f"torchprog {list(args)} exited {rc}\nstdout:\n{stdout[-3000:]}\n"
                             f"stderr:\n{stderr[-6000:]}")
    return Proc(json.loads(stdout.strip().splitlines()[-1]), stderr, cache_dir)


@pytest.fixture(scope="session")
def process_a(torch_server: Any, run_torch: Any) -> Proc:
    """Process A: the cold compile of the base model into namespace ``ab``,
    which also saves its Mega-Cache as run ``mega-a``."""
    return run_torch(torch_server.url, "ab", "--mode", "mega-save", "--run", "mega-a")
