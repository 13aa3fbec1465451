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
