"""A server's Warning header (it ignored a field of the request it does not
know: it is older than the client) is logged once per distinct warning.
Real server only."""

from __future__ import annotations

import logging

import cachesvc


def test_server_warning_logged_once(server, caplog):
    """A newer client's body field that the server does not know: the
    request succeeds, and the client logs the server's warning once however
    many answers carry it."""
    c = cachesvc.Client(server.url, timeout=60)
    key = "ab" * 32
    path = c._ns_path("leases", key)
    with caplog.at_level(logging.WARNING, logger="cachesvc"):
        for _ in range(3):  # as a newer client would send it
            r = c._json("POST", path, {"holder": "h", "ttl_s": 30, "future_field": 1}, ok=(201,))
            r.read_all()
        assert c.exists([key]) == set()  # no warning: every field known
    noted = [r.getMessage() for r in caplog.records if "ignored part of a request" in r.getMessage()]
    assert noted == [f'the server ignored part of a request (POST {path}): unknown field "future_field" ignored'], noted
