"""Tests of the pure-Python Ed25519 verifier against RFC 8032 and Go."""

import base64

import pytest

from cachesvc import _ed25519

# RFC 8032 section 7.1, TEST 1 (empty message) and TEST 2 (one byte).
RFC = [
    ("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
     "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
    ("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
     "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
]

# Made by Go's crypto/ed25519 over key ‖ sha256, as the server signs entries.
GO_PUB = "30IMMg3JT9RrpGNWN6iUB3x3gCSAUydKbvz7xLC4p4E="
GO_KEY = "2c70e12b7a0646f92279f427c7b38e7334d8e5389cff167a1dc30e73f826b683"
GO_SUM = "028ac5ae4472db3363787732b659575b714ce38a59cd8496e39dc02cfd68a4ee"
GO_SIG = "IGRdMDY857MN0+yqK+ucegCdBbrqFXALfIURdh4KHecrN8fRUMzJ7ENQLZ6cOYH0AaJKpYoQ+Wcw+fog8RaQCg=="


@pytest.mark.parametrize("pub,msg,sig", RFC)
def test_rfc8032(pub, msg, sig):
    pub, msg, sig = bytes.fromhex(pub), bytes.fromhex(msg), bytes.fromhex(sig)
    assert _ed25519.verify(pub, msg, sig)
    assert not _ed25519.verify(pub, msg + b"x", sig)
    bad = bytearray(sig)
    bad[5] ^= 1
    assert not _ed25519.verify(pub, msg, bytes(bad))


def test_go_entry_signature():
    pub = _ed25519.parse_public_key(GO_PUB)
    assert _ed25519.verify_entry(pub, GO_KEY, GO_SUM, GO_SIG)
    other = GO_SUM[:-1] + ("0" if GO_SUM[-1] != "0" else "1")
    assert not _ed25519.verify_entry(pub, GO_KEY, other, GO_SIG)
    assert not _ed25519.verify_entry(pub, other, GO_SUM, GO_SIG)
    assert not _ed25519.verify_entry(pub, GO_KEY, GO_SUM, None)
    assert not _ed25519.verify_entry(pub, GO_KEY, GO_SUM, "not base64!")
    assert not _ed25519.verify_entry(pub, "zz", GO_SUM, GO_SIG)


def test_parse_public_key_pem():
    raw = base64.b64decode(GO_PUB)
    der = bytes.fromhex("302a300506032b6570032100") + raw
    pem = "-----BEGIN PUBLIC KEY-----\n" + base64.b64encode(der).decode() + "\n-----END PUBLIC KEY-----\n"
    assert _ed25519.parse_public_key(pem) == raw
    assert _ed25519.parse_public_key(pem.encode()) == raw
    with pytest.raises(ValueError):
        _ed25519.parse_public_key("AAAA")
    with pytest.raises(ValueError):
        _ed25519.parse_public_key("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----")
