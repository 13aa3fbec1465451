"""Stock torch against `cachesvc serve --redis-addr`: the zero-code path.

torch.compile's FX graph and AOTAutograd remote caches (RedisRemoteCacheBackend,
redis-py 8) talk to cachesvc's Redis-protocol listener with nothing but
environment variables. Process A compiles a small model forward and backward
with an empty local cache and fills the remote one; process B, with another
empty local cache, gets remote hits and bit-identical outputs and gradients;
process C with a wrong token falls back to compiling (no crash). The server's
statistics show the RESP hits under the pt2 backend.

The server and the binary come from tests_torch/conftest.py (which reuses
the base suite's Server and fixtures).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("redis")

from conftest import Server, free_port  # noqa: E402 - tests_torch/conftest.py: the base suite's Server

TOKEN = "cachesvc_resp-test-token-3f9a1c"

# The child: compile a small model forward and backward, save outputs and
# gradients, print torch's cache counters as the last line.
CHILD = r'''
import json, sys
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
x = torch.randn(8, 16)
compiled = torch.compile(model)
out = compiled(x)
out.square().sum().backward()
from torch._dynamo.utils import counters
torch.save({"out": out.detach(), "grads": [p.grad for p in model.parameters()]}, sys.argv[1])
print(json.dumps({"inductor": dict(counters["inductor"]), "aot_autograd": dict(counters["aot_autograd"])}))
'''


@pytest.fixture(scope="module")
def redis_server(cachesvc_binary: str, wasm_cache: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, int]]:
    """A cachesvc serve with a tokens file and a Redis-protocol listener."""
    d = tmp_path_factory.mktemp("resp")
    tokens = d / "tokens"
    tokens.write_text(f"torch {hashlib.sha256(TOKEN.encode()).hexdigest()} default:write,*:read\n")
    port = free_port()
    s = Server(cachesvc_binary, d / "data", extra=["--wasm-cache", wasm_cache, "--tokens", str(tokens),
                                          "--redis-addr", f"127.0.0.1:{port}", "--log-level", "info"])
    try:
        s.wait_ready()
        wait_readyz(s.url)
        yield s, port
    finally:
        s.stop()


def wait_readyz(url: str, timeout: float = 300.0) -> None:
    """Until the built-in plugins are compiled the listener answers key
    commands with an error to retry (a cold wasm cache takes a while)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url}/readyz never answered 200")


def run_torch(tmp: Path, name: str, url: str) -> tuple[dict, dict]:
    """Runs the child in a fresh interpreter with an empty local cache dir
    and the remote caches on; returns its counters and saved tensors."""
    env = dict(os.environ)
    env.update({
        "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "1",
        "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE": "1",
        "TORCHINDUCTOR_REDIS_URL": url,
        "TORCHINDUCTOR_CACHE_DIR": str(tmp / f"inductor-{name}"),
        "TRITON_CACHE_DIR": str(tmp / f"triton-{name}"),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
    })
    out = tmp / f"{name}.pt"
    res = subprocess.run([sys.executable, "-c", CHILD, str(out)], env=env, capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise AssertionError(f"torch child {name} exited {res.returncode}\nstdout:\n{res.stdout[-4000:]}\n"
                             f"stderr:\n{res.stderr[-6000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1]), torch.load(out)


def get_json(url: str) -> dict:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def same_tensors(a: dict, b: dict) -> bool:
    return torch.equal(a["out"], b["out"]) and all(torch.equal(x, y) for x, y in zip(a["grads"], b["grads"]))


def test_torch_remote_cache_over_resp(redis_server: tuple[Server, int], tmp_path: Path) -> None:
    server, port = redis_server
    url = f"redis://:{TOKEN}@127.0.0.1:{port}"

    a, ta = run_torch(tmp_path, "a", url)
    assert a["inductor"].get("fxgraph_cache_miss", 0) >= 1, a
    assert a["inductor"].get("fxgraph_cache_hit", 0) == 0, a
    assert a["aot_autograd"].get("autograd_cache_miss", 0) >= 1, a
    assert a["aot_autograd"].get("autograd_cache_saved", 0) >= 1, a

    stats = get_json(server.url + "/v1/default/stats")
    writes = stats["totals"]["writes"]
    assert writes >= 2, stats["totals"]  # FX graphs (forward, backward) and the AOTAutograd entry

    b, tb = run_torch(tmp_path, "b", url)
    assert b["aot_autograd"].get("autograd_cache_hit", 0) >= 1, b
    assert b["inductor"].get("fxgraph_cache_hit", 0) >= 1, b
    assert b["inductor"].get("fxgraph_cache_miss", 0) == 0, b
    assert same_tensors(ta, tb), "outputs or gradients differ after remote hits"

    stats = get_json(server.url + "/v1/default/stats")
    tot = stats["totals"]
    assert tot["hits"] >= 2, tot
    assert tot["writes"] == writes, tot  # B stored nothing new
    backends = {x["backend"]: x for x in stats["namespaces"][0]["backends"]}
    assert set(backends) == {"pt2"}, backends
    assert backends["pt2"]["hits"] == tot["hits"], backends
    assert tot["compile_seconds_saved"] > 0, tot  # time_taken_ms of the entries B hit

    with urllib.request.urlopen(urllib.request.Request(server.url + "/metrics",
                                                       headers={"Authorization": f"Bearer {TOKEN}"}),
                                timeout=10) as r:
        metrics = r.read().decode()
    assert f'cachesvc_lookups_by_route_total{{result="hit",route="resp"}} {tot["hits"]}' in metrics
    assert 'cachesvc_resp_commands_total{command="hello",result="ok"}' in metrics
    # Healthy clients count no errors (an alert may watch them): redis-py's
    # CLIENT MAINT_NOTIFICATIONS probe on every connection is "unsupported".
    errors = [line for line in metrics.splitlines()
              if line.startswith("cachesvc_resp_commands_total{") and 'result="error"' in line
              and not line.endswith(" 0")]
    assert errors == [], errors
    assert 'cachesvc_resp_commands_total{command="client",result="unsupported"}' in metrics

    # A wrong token: redis-py's HELLO 3 AUTH is refused (WRONGPASS, an
    # AuthenticationError), torch turns its remote cache off and compiles.
    c, tc = run_torch(tmp_path, "c", f"redis://:wrong-token@127.0.0.1:{port}")
    assert c["inductor"].get("fxgraph_cache_hit", 0) == 0, c
    assert c["aot_autograd"].get("autograd_cache_hit", 0) == 0, c
    assert same_tensors(ta, tc)
    assert get_json(server.url + "/v1/default/stats")["totals"]["hits"] == tot["hits"]
    assert 'resp AUTH refused: unknown token' in server.log()
