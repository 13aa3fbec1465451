"""``python -m cachesvc.torch check``: the torch user's way to learn, before
a long job, whether cachesvc.torch.install() reaches the server with these
settings (install() fails open). It was "invalid choice: 'check'".

Real server and real torch, the module run in a fresh interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import PY_DIR, free_port


def check(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("CACHESVC_")}
    e["PYTHONPATH"] = str(PY_DIR)
    e.update(env)
    return subprocess.run([sys.executable, "-m", "cachesvc.torch", *args], env=e, capture_output=True,
                          text=True, timeout=300)


def test_check(torch_server) -> None:
    r = check("check", env={"CACHESVC_URL": torch_server.url})
    assert r.returncode == 0, r
    for want in (f"server     {torch_server.url}", "read       ok", "write      ok", "torch      ",
                 "hooks present", "cachesvc.torch.install() will use this server."):
        assert want in r.stdout, (want, r.stdout)
    url = f"http://127.0.0.1:{free_port()}"
    r = check("check", env={"CACHESVC_URL": url})
    assert r.returncode == 3 and f"is cachesvc serve running at {url}" in r.stderr, r


def test_help_lists_check() -> None:
    r = check("--help", env={})
    assert r.returncode == 0 and "check" in r.stdout and "load RUN" in r.stdout, r


def test_unknown_option() -> None:
    """`--urll x info RUN` said "invalid choice: 'x'", blaming the command."""
    r = check("--urll", "http://x:1", "info", "run-1", env={})
    assert r.returncode == 2 and "unknown option --urll (did you mean --url?)" in r.stderr, r
