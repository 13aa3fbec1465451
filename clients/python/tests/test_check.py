"""``python -m cachesvc.jax check``: what a user runs before a long job to
learn whether install() will reach the server with their settings (install
itself fails open, so a wrong URL, token or namespace shows only as one
warning and a job with no hits). ``python -m cachesvc.jax`` printed nothing
and exited 0.

Real server, the module run in a fresh interpreter as a user runs it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from conftest import PY_DIR, free_port

WRITER, READER = "cachesvc_" + "w" * 40, "cachesvc_" + "r" * 40


def check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("CACHESVC_")}
    e["PYTHONPATH"] = str(PY_DIR)
    e.setdefault("JAX_PLATFORMS", "cpu")
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "cachesvc.jax", *args], env=e, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def auth_server(cachesvc_binary: str, wasm_cache: str, tmp_path_factory: pytest.TempPathFactory):
    from conftest import Server

    d = tmp_path_factory.mktemp("check")
    tokens = d / "tokens"
    tokens.write_text(f"w {hashlib.sha256(WRITER.encode()).hexdigest()} default:write\n"
                      f"r {hashlib.sha256(READER.encode()).hexdigest()} default:read\n")
    s = Server(cachesvc_binary, d / "data", "127.0.0.1:0", ["--wasm-cache", wasm_cache, "--tokens", str(tokens)])
    yield s.wait_ready()
    s.stop()


def test_usage() -> None:
    r = check("--help")
    assert r.returncode == 0 and "check" in r.stdout and "CACHESVC_URL" in r.stdout, r
    r = check()
    assert r.returncode == 2 and "python -m cachesvc.jax check" in r.stderr, r


@pytest.mark.parametrize("args,want", [
    (["check", "--namespce", "x"], "unknown option --namespce (did you mean --namespace?)"),
    (["--urll", "http://x:1", "check"], "unknown option --urll (did you mean --url?)"),
    (["check", "--frobnicate"], "unknown option --frobnicate"),
])
def test_unknown_option(args, want) -> None:
    """A misspelt option is named, with the one meant; it was 'unrecognized
    arguments', or, before the command, "invalid choice: 'http://x:1'"."""
    r = check(*args)
    assert r.returncode == 2 and want in r.stderr, r


def test_check_ok(server) -> None:
    r = check("check", env={"CACHESVC_URL": server.url})
    assert r.returncode == 0, r
    for want in (f"server     {server.url}", "namespace  default", "read       ok", "write      ok", "jax        ",
                 "verify     none (entries are not checked: CACHESVC_VERIFY_KEY is unset)"):
        assert want in r.stdout, (want, r.stdout)


def test_check_verify_keys(server) -> None:
    """During a key rotation CACHESVC_VERIFY_KEY holds two keys: check says
    how many the client trusts, so a fleet's roll-out can be confirmed."""
    a, b = "A" * 43 + "=", "B" * 43 + "="
    r = check("check", env={"CACHESVC_URL": server.url, "CACHESVC_VERIFY_KEY": f"{a},{b}"})
    assert r.returncode == 0 and "verify     2 keys (an entry signed by any of them is accepted)" in r.stdout, r
    r = check("check", "--json", env={"CACHESVC_URL": server.url, "CACHESVC_VERIFY_KEY": a})
    assert r.returncode == 0 and '"verify_keys": 1' in r.stdout, r


@pytest.mark.parametrize("env,want", [
    ({"CACHESVC_URL": ""}, "no server URL: pass --url or set CACHESVC_URL"),
    ({"CACHESVC_URL": "127.0.0.1:8080"}, "url must be http(s)://host[:port]"),
    ({"CACHESVC_NAMESPACE": "Team_A"}, 'namespace "Team_A" (CACHESVC_NAMESPACE) is invalid'),
    ({"CACHESVC_TOKEN_FILE": "/nonexistent/token"}, "/nonexistent/token"),
    ({"CACHESVC_VERIFY_KEY": "A" * 43 + "=,bad!"}, "verify key 2 of 2 ('bad!') must be base64"),
])
def test_check_settings(server, env, want) -> None:
    r = check("check", env={"CACHESVC_URL": server.url, **env})
    assert r.returncode == 2 and want in r.stderr, r


def test_check_server_down() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    r = check("check", env={"CACHESVC_URL": url})
    assert r.returncode == 3 and f"is cachesvc serve running at {url}" in r.stderr, r


def test_check_tokens(auth_server) -> None:
    url = auth_server.url
    r = check("check", env={"CACHESVC_URL": url})
    assert r.returncode == 3 and "unauthorized" in r.stderr and "CACHESVC_TOKEN_FILE" in r.stderr, r
    assert "pausing all calls" not in r.stderr, r.stderr  # the client's training-job warning is not for here
    r = check("check", env={"CACHESVC_URL": url, "CACHESVC_TOKEN": "cachesvc_unknown"})
    assert r.returncode == 3 and "not known to this server" in r.stderr, r
    r = check("check", env={"CACHESVC_URL": url, "CACHESVC_TOKEN": READER})
    assert r.returncode == 0 and "read       ok" in r.stdout, r
    assert "write      refused" in r.stdout and "lacks write scope" in r.stdout, r.stdout
    r = check("check", "--namespace", "team-a", env={"CACHESVC_URL": url, "CACHESVC_TOKEN": WRITER})
    assert r.returncode == 3 and 'lacks read scope in namespace "team-a"' in r.stderr, r
    r = check("check", env={"CACHESVC_URL": url, "CACHESVC_TOKEN": WRITER})
    assert r.returncode == 0 and "write      ok" in r.stdout, r


def test_check_without_jax(server, tmp_path) -> None:
    """A Python without JAX: the server is ready, but install() would do
    nothing there, which check says (exit 4) instead of 'will use'."""
    (tmp_path / "jax.py").write_text("raise ImportError('no JAX in this environment')\n")
    e = {"CACHESVC_URL": server.url, "PYTHONPATH": f"{tmp_path}{os.pathsep}{PY_DIR}"}
    r = check("check", env=e)
    assert r.returncode == 4 and "read       ok" in r.stdout and "installs nothing" in r.stdout, r
    assert "will use this server" not in r.stdout, r.stdout
