"""Mutual TLS: a real `cachesvc serve --tls-client-ca` refuses a client
without a certificate (saying which arguments to give) and serves one with
client_cert/client_key, or with CACHESVC_CLIENT_CERT/CACHESVC_CLIENT_KEY
through Settings (what cachesvc.jax and cachesvc.torch install from). The
certificates are made with the openssl command."""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
from pathlib import Path

import pytest

import cachesvc
from cachesvc._failopen import Settings

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


def _openssl(d: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)


def _key(d: Path, name: str) -> None:
    _openssl(d, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", name)


def _sign(d: Path, name: str, subject: str, ext: str) -> None:
    """Writes name.key and name.pem, signed by ca.pem with the extensions ext."""
    _key(d, f"{name}.key")
    _openssl(d, "req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr")
    (d / f"{name}.ext").write_text(ext)
    _openssl(d, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "1", "-extfile", f"{name}.ext", "-out", f"{name}.pem")


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    """ca.pem; server.pem/.key for 127.0.0.1; client.pem/.key; both.pem (the
    client's certificate and key in one file)."""
    d = tmp_path / "pki"
    d.mkdir()
    _key(d, "ca.key")
    _openssl(d, "req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=cachesvc test CA", "-days", "1", "-out", "ca.pem")
    _sign(d, "server", "/CN=localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _sign(d, "client", "/CN=test-client", "extendedKeyUsage=clientAuth\n")
    (d / "both.pem").write_text((d / "client.pem").read_text() + (d / "client.key").read_text())
    return d


@pytest.fixture
def mtls_url(start_server, pki: Path, monkeypatch) -> str:
    """A server requiring client certificates, trusted through SSL_CERT_FILE."""
    monkeypatch.setenv("SSL_CERT_FILE", str(pki / "ca.pem"))
    s = start_server(extra=["--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key"),
                            "--tls-client-ca", str(pki / "ca.pem")], wait=False)
    url = s.wait_url()
    assert url.startswith("https://"), s.log()
    return url


def test_client_certificate(mtls_url: str, pki: Path):
    data = b"an executable" * 100
    key = hashlib.sha256(data).hexdigest()
    with pytest.raises(cachesvc.Error) as e:
        cachesvc.Client(mtls_url, retries=0).get(key)
    assert e.value.code == "connection_failed" and "client_cert=" in e.value.message, e.value

    with cachesvc.Client(mtls_url, retries=0, client_cert=pki / "client.pem", client_key=pki / "client.key") as c:
        assert c.put(key, data).created
        assert c.get(key) == data
    with cachesvc.Client(mtls_url, retries=0, client_cert=str(pki / "both.pem")) as c:  # key in the same file
        assert c.get(key) == data


def test_client_certificate_from_env(mtls_url: str, pki: Path, monkeypatch, caplog):
    monkeypatch.setenv("CACHESVC_URL", mtls_url)
    monkeypatch.setenv("CACHESVC_CLIENT_CERT", str(pki / "client.pem"))
    monkeypatch.setenv("CACHESVC_CLIENT_KEY", str(pki / "client.key"))
    c = Settings.resolve().client_or_warn(logging.getLogger("cachesvc"), timeout=30, retries=0, not_installed="x")
    assert c is not None and c.healthy(timeout=10)
    c.put(hashlib.sha256(b"e").hexdigest(), b"e")

    monkeypatch.setenv("CACHESVC_CLIENT_KEY", str(pki / "server.key"))  # not the certificate's key
    with caplog.at_level(logging.WARNING, logger="cachesvc"):
        c = Settings.resolve().client_or_warn(logging.getLogger("cachesvc"), timeout=30, retries=0,
                                              not_installed="nothing installed")
    msgs = [r.getMessage() for r in caplog.records]
    assert c is None and len(msgs) == 1, msgs
    assert str(pki / "server.key") in msgs[0] and "CACHESVC_CLIENT_CERT" in msgs[0], msgs


def test_untrusted_server_certificate(start_server, pki: Path, monkeypatch):
    """A server whose CA the client does not trust: the error says how to
    trust it (SSL_CERT_FILE), as the CLI's does; before, it was only
    OpenSSL's "unable to get local issuer certificate"."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    s = start_server(extra=["--tls-cert", str(pki / "server.pem"), "--tls-key", str(pki / "server.key")], wait=False)
    with pytest.raises(cachesvc.Error) as e:
        cachesvc.Client(s.wait_url(), retries=0).get(hashlib.sha256(b"x").hexdigest())
    assert e.value.code == "connection_failed" and "SSL_CERT_FILE=" in e.value.message, e.value


@pytest.mark.parametrize("kwargs,needle", [
    ({"client_key": "k.pem"}, "needs client_cert"),
    ({"client_cert": "/nonexistent/client.pem"}, "/nonexistent/client.pem"),
])
def test_bad_client_certificate_arguments(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        cachesvc.Client("https://127.0.0.1:9", **kwargs)
