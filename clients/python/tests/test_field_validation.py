"""The client's JSON bodies carry only fields servers know, and it never
asks for ``?field_validation=`` itself: a newer client against an older
server (which refuses unknown fields, as ``?field_validation=strict`` does)
must not fail. Real server only."""

from __future__ import annotations

import logging
import re

import cachesvc


def test_json_bodies_have_no_unknown_fields(server, caplog):
    """Every call that sends a JSON body (exists, batch, lease and its
    renewal and release, report, quarantine, restore): none names
    field_validation, the server counts no ignored field
    (cachesvc_request_unknown_fields_total stays 0) and the client logs no
    server warning."""
    c = cachesvc.Client(server.url, timeout=60)
    sent: list[str] = []
    request = c._request

    def recording(method, path, **kw):
        sent.append(f"{method} {path}")
        return request(method, path, **kw)

    c._request = recording
    key = "cd" * 32
    with caplog.at_level(logging.WARNING, logger="cachesvc"):
        assert c.exists([key]) == set()
        with c.lease(key, ttl=30) as lease:
            assert lease.granted
            assert lease.acquire()  # its own renewal
        assert c.put(key, b"executable")
        assert c.batch_get([key]) == {key: b"executable"}
        assert c.report(key, "cannot load") is not None
        assert c.quarantine(key, "test")
        assert c.restore(key)
    assert not [s for s in sent if "field_validation" in s], sent
    assert any("/leases/" in s for s in sent) and any("/reports" in s for s in sent), sent
    metrics = request("GET", "/metrics").read_all().decode()
    counts = re.findall(r"^cachesvc_request_unknown_fields_total\{[^}]*\} (\S+)$", metrics, re.M)
    assert counts and all(float(v) == 0 for v in counts), counts
    assert not [r.getMessage() for r in caplog.records if "ignored part of a request" in r.getMessage()]
