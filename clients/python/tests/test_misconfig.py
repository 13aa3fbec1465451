"""A misconfigured cache must not stop the training job: a launcher's bad
CACHESVC_* value (a URL without http://, a missing or empty token file, a
malformed verify key, a client certificate that does not load, an invalid namespace, a CACHESVC_MODE typo) makes cachesvc.jax.install() warn
once and install nothing (or use the default mode), never raise into the job."""

from __future__ import annotations

import logging

import pytest

import cachesvc.jax as cj

CONFIG_VARS = ("CACHESVC_URL", "CACHESVC_SERVER", "CACHESVC_NAMESPACE", "CACHESVC_NS", "CACHESVC_TOKEN", "CACHESVC_TOKEN_FILE",
               "CACHESVC_VERIFY_KEY", "CACHESVC_MODE", "CACHESVC_CLIENT_CERT", "CACHESVC_CLIENT_KEY")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in CONFIG_VARS:
        monkeypatch.delenv(name, raising=False)
    yield
    cj.uninstall()


@pytest.mark.parametrize("env,needle", [
    ({"CACHESVC_URL": "cache:8080"}, "url must be http(s)://host[:port]"),
    ({"CACHESVC_URL": "http://127.0.0.1:9", "CACHESVC_TOKEN_FILE": "/nonexistent/token"}, "/nonexistent/token"),
    ({"CACHESVC_URL": "http://127.0.0.1:9", "CACHESVC_VERIFY_KEY": "not a key"}, "verify key"),
    ({"CACHESVC_URL": "https://127.0.0.1:9", "CACHESVC_CLIENT_CERT": "/nonexistent/client.pem"}, "/nonexistent/client.pem"),
    ({"CACHESVC_URL": "https://127.0.0.1:9", "CACHESVC_CLIENT_KEY": "/nonexistent/key.pem"}, "needs client_cert"),
    # Every compile's lookup and write were refused 400 bad_namespace, in a
    # warning that named no variable.
    ({"CACHESVC_URL": "http://127.0.0.1:9", "CACHESVC_NAMESPACE": "Team_A"},
     'namespace "Team_A" (namespace= or CACHESVC_NAMESPACE) is invalid'),
    # A trailing newline (a value read from a file) passed a "^...$" match.
    ({"CACHESVC_URL": "http://127.0.0.1:9", "CACHESVC_NAMESPACE": "team-a\n"},
     "(namespace= or CACHESVC_NAMESPACE) is invalid"),
])
def test_bad_config_from_env_installs_nothing(monkeypatch, caplog, env, needle):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with caplog.at_level(logging.WARNING, logger="cachesvc"):
        assert cj.install() is None
    msgs = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(msgs) == 1 and needle in msgs[0] and "not installed" in msgs[0], msgs
    assert cj.installed() is None


def test_empty_token_file_installs_nothing(monkeypatch, caplog, tmp_path):
    empty = tmp_path / "token"
    empty.write_text("")
    monkeypatch.setenv("CACHESVC_TOKEN_FILE", str(empty))
    with caplog.at_level(logging.WARNING, logger="cachesvc"):
        assert cj.install("http://127.0.0.1:9") is None
    assert any("is empty" in r.getMessage() for r in caplog.records)


def test_mode_typo_in_env_uses_default(monkeypatch, caplog):
    monkeypatch.setenv("CACHESVC_MODE", "jax_key")
    with caplog.at_level(logging.WARNING, logger="cachesvc"):
        b = cj.install("http://127.0.0.1:9")
    assert b is not None and b.mode == "canonical"
    assert any("CACHESVC_MODE='jax_key'" in r.getMessage() for r in caplog.records)
    # An explicit bad argument is a programming error and still raises.
    with pytest.raises(ValueError):
        cj.install("http://127.0.0.1:9", mode="jax_key")
