"""`cachesvc warm --torch` hands the command line's client settings to the
`python -m cachesvc.torch load` it runs: --verify-key (Python takes only
CACHESVC_VERIFY_KEY) and --token-file.

The blob stored here is bytes torch cannot read: one whose signature does
not verify is refused before torch sees it (load exits 3); one that does
reaches torch, which (2.15) logs that the bytes are corrupted and returns
None: load exits 4 (torch could not read it). That tells the two apart
without a compile.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

import cachesvc
from cachesvc.torch import _keys
from conftest import PY_DIR, Server, clean_env

NS, RUN = "warmv", "verify-run"


def _cli(binary: str, *args: str) -> dict[str, str]:
    out = subprocess.run([binary, *args], capture_output=True, text=True, check=True).stdout
    return dict(line.partition(": ")[::2] for line in out.splitlines())


@pytest.fixture(scope="module")
def signed(cachesvc_binary: str, wasm_cache: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A server signing with a.key and wanting a token, holding a blob under
    this environment's Mega-Cache key for RUN; a.key.pub, b.key.pub and the
    token file beside it."""
    d = tmp_path_factory.mktemp("warmv")
    for name in ("a", "b"):
        _cli(cachesvc_binary, "signkey", "new", "--out", str(d / f"{name}.key"))
    tok = _cli(cachesvc_binary, "token", "new", "--name", "warmv", "--scopes", f"{NS}:write")
    (d / "tokens").write_text(tok["line"] + "\n")
    (d / "token").write_text(tok["token"] + "\n")
    srv = Server(cachesvc_binary, d / "data", extra=["--wasm-cache", wasm_cache, "--signing-key", str(d / "a.key"),
                                                      "--tokens", str(d / "tokens")])
    try:
        srv.wait_ready()
        c = cachesvc.Client(srv.url, namespace=NS, token=tok["token"])
        c.put(c.key(_keys.mega_signature(RUN)).key, b"not a Mega-Cache blob", backend="pt2")
        yield srv, d
    finally:
        srv.stop()


# Each case: the --verify-key arguments ("{d}" is the key directory), an
# inherited CACHESVC_VERIFY_KEY, and whether the blob's signature verifies.
CASES = [
    pytest.param(["--verify-key", "{d}/b.key.pub"], None, False, id="other key"),
    pytest.param(["--verify-key", "{d}/b.key.pub"], "{d}/a.key.pub", False, id="flag replaces the environment"),
    pytest.param(["--verify-key", "{d}/b.key.pub", "--verify-key", "{d}/a.key.pub"], None, True, id="repeated"),
    pytest.param(["--verify-key", "{d}/b.key.pub,{d}/a.key.pub"], None, True, id="list"),
    pytest.param([], "{d}/a.key.pub", True, id="environment only"),
]


@pytest.mark.parametrize("flags,env_key,verifies", CASES)
def test_warm_torch_verify_key(signed: Any, tmp_path: Path, flags: list[str], env_key: str | None,
                               verifies: bool) -> None:
    srv, d = signed
    extra = {"CACHESVC_VERIFY_KEY": env_key.format(d=d)} if env_key else {}
    res = subprocess.run([srv.binary, "warm", "--torch", "--run", RUN, "--url", srv.url, "--namespace", NS,
                          "--token-file", str(d / "token"), "--python", sys.executable,
                          "--torch-cache-dir", str(tmp_path), *(f.format(d=d) for f in flags)],
                         env=clean_env(extra), capture_output=True, text=True, timeout=300, cwd=PY_DIR)
    if verifies:
        assert "signature" not in res.stderr, res.stderr
        assert res.returncode == 1, (res.stdout, res.stderr)
        assert "exited with status 4" in res.stderr and "torch could not read the 21-byte blob" in res.stderr, \
            res.stderr
    else:
        assert res.returncode == 1, (res.stdout, res.stderr)
        assert "exited with status 3" in res.stderr and "signature does not match" in res.stderr, res.stderr
