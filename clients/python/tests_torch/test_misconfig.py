"""cachesvc.torch.install() with a bad CACHESVC_* value warns once and
installs nothing instead of raising into the training job."""

from __future__ import annotations

import logging

import pytest

import cachesvc.torch as ct


@pytest.mark.parametrize("env,needle", [
    ({"CACHESVC_URL": "cache:8080"}, "url must be http(s)://host[:port]"),
    ({"CACHESVC_URL": "http://127.0.0.1:9", "CACHESVC_TOKEN_FILE": "/nonexistent/token"}, "/nonexistent/token"),
    ({"CACHESVC_URL": "http://127.0.0.1:9", "CACHESVC_VERIFY_KEY": "not a key"}, "verify key"),
    ({"CACHESVC_URL": "https://127.0.0.1:9", "CACHESVC_CLIENT_CERT": "/nonexistent/client.pem"}, "/nonexistent/client.pem"),
    ({"CACHESVC_URL": "https://127.0.0.1:9", "CACHESVC_CLIENT_KEY": "/nonexistent/key.pem"}, "needs client_cert"),
])
def test_bad_config_from_env_installs_nothing(monkeypatch, caplog, env, needle):
    for name in ("CACHESVC_URL", "CACHESVC_SERVER", "CACHESVC_TOKEN", "CACHESVC_TOKEN_FILE", "CACHESVC_VERIFY_KEY",
                 "CACHESVC_CLIENT_CERT", "CACHESVC_CLIENT_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with caplog.at_level(logging.WARNING, logger="cachesvc"):
        assert ct.install() is None
    msgs = [r.getMessage() for r in caplog.records if "cannot use the configured server" in r.getMessage()]
    assert len(msgs) == 1 and needle in msgs[0] and "not installed" in msgs[0], msgs
    assert ct.installed() is None


def test_wrong_token_warns_once_saying_which_setting(cachesvc_binary, wasm_cache, tmp_path, caplog):
    """A token the server does not know (401): every lookup and write is a
    miss, one warning names the settings to check, torch compiles."""
    import hashlib

    from conftest import Server

    from cachesvc import Client
    from cachesvc._failopen import Breaker
    from cachesvc.torch._service import Service

    tokens = tmp_path / "tokens"
    tokens.write_text(f"t {hashlib.sha256(b'cachesvc_the-right-token-0123').hexdigest()} *:write\n")
    srv = Server(cachesvc_binary, tmp_path / "data", extra=["--wasm-cache", wasm_cache, "--tokens", str(tokens)])
    try:
        srv.wait_ready()
        svc = Service(Client(srv.url, namespace="tok", token="cachesvc_a-wrong-token-0123"), timeout=10.0,
                      put_timeout=None, breaker=Breaker(3, 30.0), warn_interval=60.0, components=None,
                      background_uploads=False, upload_queue_bytes=1 << 20, flush_at_exit=10.0)
        with caplog.at_level(logging.WARNING, logger="cachesvc"):
            for i in range(3):
                key = f"pt2:fx-graph-v1::ftok{i:016d}:c1"
                assert svc.get(key) is None
                svc.put(key, b'{"data": "x", "time_taken_ms": 10}')
        s = svc.stats()
        assert (s["errors"], s["put_errors"], s["hits"]) == (3, 3, 0), s
        msgs = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(msgs) == 1, msgs
        assert "401" in msgs[0] and "CACHESVC_TOKEN" in msgs[0] and "compiling without the shared cache" in msgs[0], msgs
    finally:
        srv.stop()


def test_missing_explanation_hook_is_info_and_caches_stay_routed(monkeypatch, caplog):
    """A torch without the hash functions miss explanations wrap still routes
    every cache: one INFO line says only explanations are coarser. The warning
    used to say "those caches are not routed", which was not so (torch 2.11
    on an H200)."""
    import importlib

    from cachesvc import Client
    from cachesvc.torch import _keys

    mod = importlib.import_module(_keys.AOT_LINES[0])
    monkeypatch.delattr(mod, _keys.AOT_LINES[1])
    monkeypatch.delattr(mod, _keys.AOT_KEY[1])
    with caplog.at_level(logging.INFO, logger="cachesvc"):
        svc = ct.install(client=Client("http://127.0.0.1:9", namespace="hooks"))
    try:
        assert svc is not None and ct.installed() is svc
        warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert warned == [], warned
        infos = [r.getMessage() for r in caplog.records if _keys.AOT_LINES[1] in r.getMessage()]
        assert len(infos) == 1 and "routed to cachesvc" in infos[0] and "fewer components" in infos[0], infos
    finally:
        ct.uninstall()


def test_older_torch_explains_aot_misses_through_autograd_cache_key(monkeypatch, caplog):
    """torch 2.11 (probed on an H200 image) has no _get_debug_lines_for_cache_key:
    its autograd_cache_key computes the debug lines and returns (key, lines).
    The client then wraps autograd_cache_key, records the components and
    passes torch's result through unchanged. The stand-in below has 2.11's
    contract; torch 2.11 itself cannot run beside the pinned 2.15."""
    import importlib

    from cachesvc import Client
    from cachesvc.torch import _keys

    mod = importlib.import_module(_keys.AOT_LINES[0])
    monkeypatch.delattr(mod, _keys.AOT_LINES[1])
    result = ("aOLDTORCHKEY", ["[0a1b2c] example_inputs[0]: TensorMetadata(device=device(type='cpu'))",
                               "[3d4e5f] fx_config[config]: {}", "[6a7b8c] aot_config: AOTConfig()"])

    def autograd_cache_key(gm, example_inputs, config, fx_config):  # 2.11's signature
        return result

    monkeypatch.setattr(mod, _keys.AOT_KEY[1], autograd_cache_key)
    with caplog.at_level(logging.INFO, logger="cachesvc"):
        svc = ct.install(client=Client("http://127.0.0.1:9", namespace="hooks"))
    try:
        assert svc is not None
        assert [r.getMessage() for r in caplog.records if "lacks" in r.getMessage()] == []
        assert getattr(mod, _keys.AOT_KEY[1]) is not autograd_cache_key, "autograd_cache_key not wrapped"
        assert getattr(mod, _keys.AOT_KEY[1])(None, [], None, None) == result
        comps = svc.components.get("aOLDTORCHKEY")
        assert set(comps) >= {"graph", "device"} and comps["device"] == "cpu", comps
    finally:
        ct.uninstall()
    assert getattr(mod, _keys.AOT_KEY[1]) is autograd_cache_key, "uninstall did not restore autograd_cache_key"
