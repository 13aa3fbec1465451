"""Tokens from a file, and Ed25519 entry signatures verified before bytes are returned."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

import cachesvc


def k(s: str | bytes) -> str:
    return hashlib.sha256(s.encode() if isinstance(s, str) else s).hexdigest()


def cli(binary: str, *args: str) -> dict[str, str]:
    out = subprocess.run([binary, *args], capture_output=True, text=True, check=True).stdout
    fields = {}
    for line in out.splitlines():
        name, _, value = line.partition(": ")
        fields[name] = value
    return fields


def test_token_file(start_server, cachesvc_binary, tmp_path: Path):
    made = cli(cachesvc_binary, "token", "new", "--name", "py-writer", "--scopes", "default:write")
    tokens = tmp_path / "tokens"
    tokens.write_text(made["line"] + "\n")
    s = start_server(extra=["--tokens", str(tokens)])
    token_file = tmp_path / "token"
    token_file.write_text(made["token"] + "\n")

    c = cachesvc.Client(s.url, token_file=str(token_file))
    key = k("token file")
    assert c.put(key, b"exe").created
    assert c.get(key) == b"exe"

    with pytest.raises(cachesvc.Error) as ei:
        cachesvc.Client(s.url, retries=0).get(key)
    assert ei.value.status == 401 and ei.value.code == "unauthorized"
    with pytest.raises(cachesvc.Error) as ei:
        cachesvc.Client(s.url, token="cachesvc_wrong", retries=0).get(key)
    assert ei.value.status == 401
    empty = tmp_path / "empty"
    empty.write_text("")
    with pytest.raises(ValueError):
        cachesvc.Client(s.url, token_file=str(empty))


def test_signatures(start_server, cachesvc_binary, tmp_path: Path):
    keyfile = tmp_path / "sign.key"
    pub = cli(cachesvc_binary, "signkey", "new", "--out", str(keyfile))["public key (base64)"]
    other = cli(cachesvc_binary, "signkey", "new", "--out", str(tmp_path / "other.key"))["public key (base64)"]
    signed = start_server(extra=["--signing-key", str(keyfile)])
    data = b"signed executable" * 1000
    key = k("signed")
    cachesvc.Client(signed.url).put(key, data)

    for verify in (pub, (tmp_path / "sign.key.pub").read_text()):
        c = cachesvc.Client(signed.url, verify_key=verify)
        assert c.get(key) == data
        assert c.batch_get([key, k("absent")]) == {key: data}

    wrong = cachesvc.Client(signed.url, verify_key=other, retries=0)
    for call in (lambda: wrong.get(key), lambda: wrong.batch_get([key])):
        with pytest.raises(cachesvc.Error) as ei:
            call()
        assert ei.value.code == "bad_signature"

    unsigned = start_server()
    cachesvc.Client(unsigned.url).put(key, data)
    with pytest.raises(cachesvc.Error) as ei:
        cachesvc.Client(unsigned.url, verify_key=pub, retries=0).get(key)
    assert ei.value.code == "bad_signature" and "not signed" in ei.value.message
    # Without a verify key nothing is checked.
    assert cachesvc.Client(unsigned.url).get(key) == data

    with pytest.raises(ValueError):
        cachesvc.Client(signed.url, verify_key="not a key")


def test_signatures_rotation(start_server, cachesvc_binary, tmp_path: Path):
    """During a key rotation clients trust the old and the new key: an entry
    signed by either is accepted, one signed by a third key by neither."""
    a = cli(cachesvc_binary, "signkey", "new", "--out", str(tmp_path / "a.key"))["public key (base64)"]
    b = cli(cachesvc_binary, "signkey", "new", "--out", str(tmp_path / "b.key"))["public key (base64)"]
    cli(cachesvc_binary, "signkey", "new", "--out", str(tmp_path / "c.key"))
    by_a = start_server(extra=["--signing-key", str(tmp_path / "a.key")])
    by_c = start_server(extra=["--signing-key", str(tmp_path / "c.key")])
    data = b"rotated" * 100
    key = k("rotation")
    cachesvc.Client(by_a.url).put(key, data)
    cachesvc.Client(by_c.url).put(key, data)
    b_pem = (tmp_path / "b.key.pub").read_text()
    for keys in (f"{b},{a}", f"{b}, {a}", f"{b}\n{a}", [b, a], f"{b_pem},{a}", f"{b_pem}\n{a}"):
        assert cachesvc.Client(by_a.url, verify_key=keys).get(key) == data, keys
        with pytest.raises(cachesvc.Error) as ei:
            cachesvc.Client(by_c.url, verify_key=keys, retries=0).get(key)
        assert ei.value.code == "bad_signature" and "2 verify keys" in ei.value.message, (keys, ei.value.message)


@pytest.mark.parametrize("keys,want", [
    ("AAAA", "verify key must be 32 bytes, got 3"),
    ("not a key", "verify key 1 of 3 ('not') must be base64 of 32 bytes or a PEM PUBLIC KEY"),
    (f"{'A' * 43}=,bad!", "verify key 2 of 2 ('bad!') must be base64 of 32 bytes or a PEM PUBLIC KEY"),
    (["AAAA", "A" * 43 + "="], "verify key 1 of 2 ('AAAA') must be 32 bytes, got 3"),
    (" , ", "verify key: no key given"),
    ([], "verify key: no key given"),
])
def test_verify_keys_invalid(keys, want):
    with pytest.raises(ValueError) as ei:
        cachesvc.Client("http://127.0.0.1:9", verify_key=keys)
    assert want in str(ei.value), str(ei.value)
