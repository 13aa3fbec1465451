"""prefetch(run) of a run the server has no manifest for (the first run of a
sweep) is not a failure: no warning, and the rate limiter stays unspent, so
the next real failure (here a write the token may not make) is still warned
about instead of being suppressed for warn_interval."""

from __future__ import annotations

import logging

import cachesvc
import cachesvc.jax as cj
from cachesvc import Error


def test_prefetch_of_unknown_run_does_not_warn(monkeypatch, caplog):
    client = cachesvc.Client("http://127.0.0.1:9", retries=0)

    def manifest(run, **kw):
        raise Error(404, "unknown_run", f'Unknown run "{run}" in namespace "default".')

    monkeypatch.setattr(client, "manifest", manifest)
    b = cj.install(client=client)
    try:
        with caplog.at_level(logging.INFO, logger="cachesvc"):
            assert cj.prefetch(run="sweep-new-1") == 0
            assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
            assert any("no manifest" in r.getMessage() for r in caplog.records)
            b._failed("write of jit_f", Error(403, "forbidden", 'Token "reader" lacks write scope.'))
        warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warned) == 1 and "forbidden" in warned[0]
    finally:
        cj.uninstall()
