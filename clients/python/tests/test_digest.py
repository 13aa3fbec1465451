"""Digest-first keys and lookups through a real server: a repeated lookup of
a large module sends only its SHA-256, the server's memo survives a restart,
and a server without digest lookups is detected once and sent signatures."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

import cachesvc


def metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+(?:\{[^}]*\})?) (\S+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def bytes_in(url: str) -> float:
    return metrics(url)["cachesvc_bytes_in_total"]


def digest_requests(url: str, outcome: str) -> float:
    return metrics(url).get(f'cachesvc_signature_digest_requests_total{{outcome="{outcome}"}}', 0.0)


def big_signature(name: str, size: int = 2 << 20) -> dict:
    """An xla signature whose module text is about size bytes."""
    body = "".join(f"    %c{i} = stablehlo.constant dense<{i}.0> : tensor<f32>\n" for i in range(size // 56))
    module = f"module @{name} {{\n  func.func public @main() -> tensor<f32> {{\n{body}    return %c0 : tensor<f32>\n  }}\n}}\n"
    return {"backend": "xla", "module": module, "module_format": "stablehlo", "platform": "cpu"}


def test_repeated_lookup_sends_only_the_digest(start_server, tmp_path):
    data = tmp_path / "data"
    srv = start_server(data=data)
    c = cachesvc.Client(srv.url, timeout=120)
    sig = big_signature("digest_first")
    full = len(json.dumps(sig, separators=(",", ":"), sort_keys=True).encode())
    assert full > 1 << 20

    before, unknown = bytes_in(srv.url), digest_requests(srv.url, "unknown")  # the fixture warmed plugins
    miss = c.lookup_result(sig)  # unknown digest (428), then the signature, gzipped
    first = bytes_in(srv.url) - before
    assert miss.value is None and len(miss.key) == 64
    assert 0 < first < full / 4, f"first lookup sent {first} body bytes of a {full}-byte signature; want gzip"
    assert digest_requests(srv.url, "unknown") - unknown == 1

    c.put(miss.key, b"executable", compile_seconds=2)
    before, known = bytes_in(srv.url), digest_requests(srv.url, "known")
    hit = c.lookup_result(sig)
    assert hit.value == b"executable" and hit.key == miss.key
    assert c.key(sig).key == miss.key
    assert bytes_in(srv.url) - before == 0, "a repeated lookup sent signature bytes"
    assert digest_requests(srv.url, "known") - known == 2

    # The memo survives a restart on the same data directory.
    srv.stop()
    srv = start_server(data=data)
    c = cachesvc.Client(srv.url, timeout=120)
    before, unknown = bytes_in(srv.url), digest_requests(srv.url, "unknown")
    hit = c.lookup_result(sig)
    assert hit.value == b"executable"
    assert bytes_in(srv.url) - before == 0, "after a restart the lookup sent the signature again"
    assert digest_requests(srv.url, "unknown") - unknown == 0


def test_server_without_digest_lookups(start_server):
    """--digest-lookups=false answers as an older server: the client finds out
    on its first request, then sends signatures without trying digests."""
    srv = start_server(extra=["--digest-lookups=false"])
    c = cachesvc.Client(srv.url, timeout=60)
    sig = {"backend": "passthrough", "kind": "jax", "key": "jit_old-server"}
    refused0 = sum(v for k, v in metrics(srv.url).items()
                   if k.startswith("cachesvc_http_requests_total{") and 'status="400"' in k)
    a = c.lookup_result(sig)
    b = c.lookup_result(sig)
    assert a.value is None and a.key == b.key == c.key(sig).key
    m = metrics(srv.url)
    refused = sum(v for k, v in m.items() if k.startswith("cachesvc_http_requests_total{") and 'status="400"' in k)
    assert refused - refused0 == 1, f"{refused - refused0} requests were refused; the client should stop sending digests after one"
    assert digest_requests(srv.url, "known") == 0


@pytest.mark.parametrize("how", ["option", "env"])
def test_digest_first_off(server, monkeypatch, how):
    if how == "env":
        monkeypatch.setenv("CACHESVC_DIGEST_FIRST", "0")
        c = cachesvc.Client(server.url, namespace=how)
    else:
        c = cachesvc.Client(server.url, namespace=how, digest_first=False)
    assert not c.digest_first
    sig = {"backend": "passthrough", "kind": "jax", "key": "jit_off-" + how}
    body = len(json.dumps(sig, separators=(",", ":"), sort_keys=True).encode())
    counted = digest_requests(server.url, "known") + digest_requests(server.url, "unknown")
    for _ in range(2):
        before = bytes_in(server.url)
        c.lookup_result(sig)
        assert bytes_in(server.url) - before == body
    assert digest_requests(server.url, "known") + digest_requests(server.url, "unknown") == counted
