"""Fixtures: a real `cachesvc serve` built from this repository.

The Go binary is built once per test session (`go build -o <tmp>/cachesvc
./cmd/cachesvc`), or taken from $CACHESVC_TEST_BINARY. Each server runs on a
free loopback port with its own temporary data directory.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

PY_DIR = Path(__file__).resolve().parents[1]
ROOT = PY_DIR.parents[1]
sys.path.insert(0, str(PY_DIR))

_URL_RE = re.compile(r"(https?)://127\.0\.0\.1:(\d+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running `cachesvc serve` subprocess."""

    def __init__(self, binary: str, data: Path, addr: str = "127.0.0.1:0", extra: list[str] | None = None) -> None:
        self.binary = binary
        self.data = data
        self.lines: list[str] = []
        self._found = threading.Event()
        self.url = ""
        cmd = [binary, "serve", "--addr", addr, "--data", str(data), "--log-format", "text",
               "--shutdown-grace", "2s", *(extra or [])]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if not self.url:
                m = _URL_RE.search(line)
                if m:
                    self.url = f"{m.group(1)}://127.0.0.1:{m.group(2)}"
                    self._found.set()
        self._found.set()

    def wait_ready(self, timeout: float = 180.0) -> "Server":
        deadline = time.monotonic() + timeout
        self._found.wait(timeout)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"cachesvc serve exited {self.proc.returncode}:\n{self.log()}")
            if self.url:
                try:
                    with urllib.request.urlopen(self.url + "/healthz", timeout=2) as r:
                        if r.status == 200:
                            self._warm_plugins(deadline)
                            return self
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"cachesvc serve not ready after {timeout}s:\n{self.log()}")

    def wait_url(self, timeout: float = 180.0) -> str:
        """Waits for the "serving on URL" line only: for a server whose
        /healthz this process cannot reach without a client certificate."""
        self._found.wait(timeout)
        if not self.url:
            raise RuntimeError(f"cachesvc serve printed no URL (exit {self.proc.poll()}):\n{self.log()}")
        return self.url

    def _warm_plugins(self, deadline: float) -> None:
        """The server readies its plugins on first use (tens of seconds with a
        cold compiled-code cache on a loaded machine): pay that here, not
        inside a test's time budget."""
        import cachesvc

        c = cachesvc.Client(self.url, timeout=max(5.0, deadline - time.monotonic()), retries=0)
        # An authenticating server refuses the anonymous warm-up (401): the
        # client's one warning about it is not the test's.
        quiet = logging.Filter("cachesvc.none")
        logging.getLogger("cachesvc").addFilter(quiet)
        try:
            for sig in ({"backend": "passthrough", "kind": "jax", "key": "warmup"},
                        {"backend": "xla", "module": "module @warmup {\n}\n", "module_format": "stablehlo",
                         "platform": "cpu"}):
                try:
                    c.key(sig)
                except cachesvc.Error as e:
                    if e.status in (401, 403):  # an authenticating server: nothing to warm anonymously
                        return
                    raise
        finally:
            logging.getLogger("cachesvc").removeFilter(quiet)

    def log(self) -> str:
        return "".join(self.lines[-200:])

    def kill(self) -> None:
        """Kills the server abruptly (SIGKILL)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)


@pytest.fixture(scope="session")
def cachesvc_binary(tmp_path_factory: pytest.TempPathFactory) -> str:
    prebuilt = os.environ.get("CACHESVC_TEST_BINARY")
    if prebuilt:
        return prebuilt
    out = tmp_path_factory.mktemp("bin") / "cachesvc"
    res = subprocess.run(["go", "build", "-o", str(out), "./cmd/cachesvc"], cwd=ROOT,
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.fail(f"go build ./cmd/cachesvc failed:\n{res.stdout}\n{res.stderr}")
    return str(out)


@pytest.fixture(scope="session")
def wasm_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One compiled-plugin cache for every server of the session (fast starts)."""
    return str(tmp_path_factory.mktemp("wasm-cache"))


@pytest.fixture
def start_server(cachesvc_binary: str, wasm_cache: str, tmp_path: Path) -> Iterator:
    """A factory: start_server(addr=..., extra=[...]) -> ready Server; all stopped at teardown."""
    servers: list[Server] = []

    def start(addr: str = "127.0.0.1:0", extra: list[str] | None = None, data: Path | None = None,
              wait: bool = True) -> Server:
        d = data or tmp_path / f"data{len(servers)}"
        s = Server(cachesvc_binary, d, addr, ["--wasm-cache", wasm_cache, *(extra or [])])
        servers.append(s)
        return s.wait_ready() if wait else s

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def server(start_server) -> Server:
    """One ready server with an empty data directory."""
    return start_server()


@pytest.fixture(scope="module")
def shared_server(cachesvc_binary: str, wasm_cache: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for a whole test module; tests keep apart by namespace."""
    s = Server(cachesvc_binary, tmp_path_factory.mktemp("shared-data"), extra=["--wasm-cache", wasm_cache])
    try:
        yield s.wait_ready()
    finally:
        s.stop()


def sigstop(pid: int) -> None:
    """SIGSTOPs ``pid`` and waits until every thread of it is stopped (the
    signal is delivered asynchronously: a thread already running may still
    answer a request sent at once)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass
        if states and all(st in ("T", "t") for st in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not stop")


def run_py(script: Path, args: list[str], env: dict[str, str] | None = None, timeout: float = 600) -> tuple[dict, str]:
    """Runs a Python script in a fresh interpreter; returns (last-line JSON, stderr)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(PY_DIR) + os.pathsep + e.get("PYTHONPATH", "")
    e.setdefault("JAX_PLATFORMS", "cpu")
    if env:
        e.update(env)
    res = subprocess.run([sys.executable, str(script), *args], env=e, capture_output=True, text=True,
                         timeout=timeout)
    if res.returncode != 0:
        raise AssertionError(f"{script.name} {args} exited {res.returncode}\nstdout:\n{res.stdout[-4000:]}\n"
                             f"stderr:\n{res.stderr[-4000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr
