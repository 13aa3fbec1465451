"""The environment variables every client reads: CACHESVC_URL and
CACHESVC_NAMESPACE, with the old names CACHESVC_SERVER and CACHESVC_NS still
read when the new ones are unset (the same scheme as the cachesvc command).
No server or JAX needed: Settings.resolve is where the integrations read them."""

from __future__ import annotations

import logging

import pytest

from cachesvc import _failopen
from cachesvc._failopen import Settings

NAMES = ("CACHESVC_URL", "CACHESVC_SERVER", "CACHESVC_NAMESPACE", "CACHESVC_NS")


@pytest.mark.parametrize("env,url,namespace,warns", [
    ({}, None, "default", []),
    ({"CACHESVC_URL": "http://a:1", "CACHESVC_NAMESPACE": "team-a"}, "http://a:1", "team-a", []),
    ({"CACHESVC_SERVER": "http://b:2", "CACHESVC_NS": "team-b"}, "http://b:2", "team-b",
     ["CACHESVC_SERVER", "CACHESVC_NS"]),
    ({"CACHESVC_URL": "http://a:1", "CACHESVC_SERVER": "http://b:2",
      "CACHESVC_NAMESPACE": "team-a", "CACHESVC_NS": "team-b"}, "http://a:1", "team-a", []),
])
def test_env_names_and_aliases(monkeypatch, caplog, env, url, namespace, warns):
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(_failopen, "_noted_aliases", set())
    with caplog.at_level(logging.WARNING, logger="cachesvc"):
        s = Settings.resolve()
    assert (s.url, s.namespace) == (url, namespace)
    noted = sorted(r.getMessage().split()[1] for r in caplog.records if "old name" in r.getMessage())
    assert noted == sorted(warns)


def test_arguments_win_over_env(monkeypatch):
    monkeypatch.setenv("CACHESVC_URL", "http://a:1")
    monkeypatch.setenv("CACHESVC_NS", "team-b")
    s = Settings.resolve(url="http://c:3", namespace="team-c")
    assert (s.url, s.namespace) == ("http://c:3", "team-c")


def test_alias_noted_once(monkeypatch, caplog):
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CACHESVC_SERVER", "http://b:2")
    monkeypatch.setattr(_failopen, "_noted_aliases", set())
    with caplog.at_level(logging.WARNING, logger="cachesvc"):
        Settings.resolve()
        Settings.resolve()
    assert sum("CACHESVC_SERVER is an old name" in r.getMessage() for r in caplog.records) == 1


def test_readme_jax_table_lists_every_variable_install_reads():
    """clients/python/README.md's JAX variable table names every CACHESVC_*
    variable that cachesvc.jax.install() reads (Settings.resolve and jax.py)."""
    import re
    from pathlib import Path

    py = Path(__file__).resolve().parents[1]
    read = set()
    for src in ("cachesvc/_failopen.py", "cachesvc/jax.py"):
        read |= set(re.findall(r'\benv(?:_flag)?\(\s*"(CACHESVC_\w+)"', (py / src).read_text()))
    assert {"CACHESVC_URL", "CACHESVC_TOKEN_FILE", "CACHESVC_VERIFY_KEY", "CACHESVC_MODE"} <= read, read
    readme = (py / "README.md").read_text()
    jax = readme[readme.index("## JAX"):readme.index("\n## ", readme.index("## JAX") + 1)]
    rows = [line for line in jax.splitlines() if line.startswith("| `CACHESVC_")]
    listed = {re.match(r"\| `(CACHESVC_\w+)`", line).group(1) for line in rows}
    assert sorted(read - listed) == []


@pytest.mark.parametrize("elastic,env_run,want", [
    (None, None, "host"),  # a lone process: <host>-<pid>-<random>
    ("none", None, "host"),  # torchrun's placeholder rendezvous id
    ("0b5e-job", None, "torchrun-0b5e-job"),  # every rank of one torchrun job: one run
    ("0b5e-job", "sweep-1", "sweep-1"),  # CACHESVC_RUN wins
])
def test_default_run_id_is_the_torchrun_job(monkeypatch, elastic, env_run, want):
    for name, value in (("TORCHELASTIC_RUN_ID", elastic), ("CACHESVC_RUN", env_run)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    run = Settings.resolve(None, None, None, None).run
    if want == "host":
        assert run.startswith(f"{_failopen.socket.gethostname()}-"), run
    else:
        assert run == want


@pytest.mark.parametrize("given_run,url,namespace,want", [
    (None, "http://a:1", "team-a", "sweep:arm-1"),  # the caller's client joins the install's run
    ("own-run", "http://a:1", "team-a", "own-run"),  # ... unless it names its own
    ("no-client", "http://a:1", "team-a", "sweep:arm-1"),  # none given: one from the settings
    ("no-client", "http://a:1", "Bad NS", None),  # the settings cannot make one: None, one warning
])
def test_install_client(caplog, given_run, url, namespace, want):
    """Settings.install_client is how cachesvc.jax.install and
    cachesvc.torch.install pick their client."""
    from cachesvc import Client

    s = Settings(url=url, namespace=namespace, token=None, token_file=None, verify_key=None, run="sweep:arm-1")
    given = None if given_run == "no-client" else Client("http://given:9", namespace="given", run=given_run)
    with caplog.at_level(logging.WARNING, logger="cachesvc"):
        c = s.install_client(given, logging.getLogger("cachesvc"), timeout=5.0, retries=0, not_installed="not installed")
    if want is None:
        assert c is None
        assert [r.getMessage().endswith("not installed") for r in caplog.records] == [True]
        return
    assert c.run == want
    if given is not None:
        assert c is given
    else:
        assert (c.url, c.namespace) == (url, namespace)
