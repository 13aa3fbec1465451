"""Ed25519 signature verification in pure Python (RFC 8032, section 6).

The client verifies entry signatures (``X-Cachesvc-Signature``) with it so that
the package stays stdlib-only. Only verification is implemented: it handles
public data, so constant time does not matter. One verification takes a few
milliseconds.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Sequence

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)

_Point = tuple[int, int, int, int]  # extended coordinates (X, Y, Z, T)


def _add(a: _Point, b: _Point) -> _Point:
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    aa = (y1 - x1) * (y2 - x2) % _P
    bb = (y1 + x1) * (y2 + x2) % _P
    cc = t1 * 2 * _D * t2 % _P
    dd = z1 * 2 * z2 % _P
    e, f, g, h = bb - aa, dd - cc, dd + cc, bb + aa
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _mul(s: int, pt: _Point) -> _Point:
    q: _Point = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            q = _add(q, pt)
        pt = _add(pt, pt)
        s >>= 1
    return q


def _equal(a: _Point, b: _Point) -> bool:
    x1, y1, z1, _ = a
    x2, y2, z2, _ = b
    return (x1 * z2 - x2 * z1) % _P == 0 and (y1 * z2 - y2 * z1) % _P == 0


def _recover_x(y: int, sign: int) -> int | None:
    if y >= _P:
        return None
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P != 0:
        return None
    if (x & 1) != sign:
        x = _P - x
    return x


def _decompress(b: bytes) -> _Point | None:
    if len(b) != 32:
        return None
    y = int.from_bytes(b, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = _recover_x(y, sign)
    if x is None:
        return None
    return (x, y, 1, x * y % _P)


_GY = 4 * pow(5, _P - 2, _P) % _P
_GX = _recover_x(_GY, 0)
assert _GX is not None
_G: _Point = (_GX, _GY, 1, _GX * _GY % _P)


def verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Reports whether ``signature`` is a valid Ed25519 signature of
    ``message`` under the 32-byte ``public_key``."""
    if len(public_key) != 32 or len(signature) != 64:
        return False
    a = _decompress(public_key)
    r = _decompress(signature[:32])
    if a is None or r is None:
        return False
    s = int.from_bytes(signature[32:], "little")
    if s >= _L:
        return False
    h = int.from_bytes(hashlib.sha512(signature[:32] + public_key + message).digest(), "little") % _L
    return _equal(_mul(s, _G), _add(r, _mul(h, a)))


def parse_public_key(value: str | bytes) -> bytes:
    """Parses an Ed25519 public key given as base64 of its 32 raw bytes
    (what ``cachesvc signkey new`` prints) or as a PEM ``PUBLIC KEY`` block
    (the ``.pub`` file). Raises ValueError otherwise."""
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    text = value.strip()
    if text.startswith("-----BEGIN PUBLIC KEY-----"):
        body = "".join(line for line in text.splitlines() if not line.startswith("-----"))
        der = base64.b64decode(body)
        # SubjectPublicKeyInfo for Ed25519: a fixed 12-byte prefix, then the key.
        prefix = bytes.fromhex("302a300506032b6570032100")
        if len(der) != 44 or not der.startswith(prefix):
            raise ValueError("cachesvc: the PEM public key is not an Ed25519 key")
        return der[12:]
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError as e:
        raise ValueError("cachesvc: verify key must be base64 of 32 bytes or a PEM PUBLIC KEY") from e
    if len(raw) != 32:
        raise ValueError(f"cachesvc: verify key must be 32 bytes, got {len(raw)}")
    return raw


# A PEM block keeps its line breaks, so it is cut out of a key list before the
# rest is split on commas and whitespace (base64 holds neither).
_PEM_BLOCK = re.compile(r"-----BEGIN [A-Z ]+-----.*?-----END [A-Z ]+-----", re.DOTALL)
_SEPARATORS = re.compile(r"[,\s]+")


def parse_public_keys(value: str | bytes | Sequence[str | bytes]) -> list[bytes]:
    """Parses the set of trusted verify keys: one key, several separated by
    commas and/or whitespace (as ``CACHESVC_VERIFY_KEY`` holds them during a
    key rotation), or a list of keys; each as :func:`parse_public_key` takes
    it. Raises ValueError naming the key that does not parse (its position
    and its first characters) or saying that none was given."""
    if isinstance(value, (str, bytes)):
        text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
        items: list[str | bytes] = _PEM_BLOCK.findall(text)
        items += [t for t in _SEPARATORS.split(_PEM_BLOCK.sub(",", text)) if t]
    else:
        items = list(value)
    if not items:
        raise ValueError("cachesvc: verify key: no key given (want base64 of 32 bytes or a PEM PUBLIC KEY, "
                         "several separated by commas)")
    if len(items) == 1:
        return [parse_public_key(items[0])]
    keys = []
    for i, item in enumerate(items, 1):
        try:
            keys.append(parse_public_key(item))
        except ValueError as e:
            shown = item.decode("ascii", "replace") if isinstance(item, bytes) else str(item)
            shown = shown.strip()
            shown = shown if len(shown) <= 24 else shown[:20] + "..."
            msg = str(e).removeprefix("cachesvc: ").removeprefix("verify key ").removeprefix("the ")
            raise ValueError(f"cachesvc: verify key {i} of {len(items)} ({shown!r}) {msg}") from e
    return keys


def verify_entry_any(public_keys: Sequence[bytes], key_hex: str, sha256_hex: str,
                     signature_b64: str | None) -> bool:
    """Reports whether ``signature_b64`` signs key ‖ sha256 under any of
    ``public_keys`` (the old and the new key during a rotation)."""
    return any(verify_entry(pub, key_hex, sha256_hex, signature_b64) for pub in public_keys)


def verify_entry(public_key: bytes, key_hex: str, sha256_hex: str, signature_b64: str | None) -> bool:
    """Reports whether ``signature_b64`` (the ``X-Cachesvc-Signature`` header)
    signs key ‖ sha256 (32 raw bytes each) under ``public_key``."""
    if not signature_b64:
        return False
    try:
        sig = base64.b64decode(signature_b64, validate=True)
        msg = bytes.fromhex(key_hex) + bytes.fromhex(sha256_hex)
    except ValueError:
        return False
    if len(msg) != 64:
        return False
    return verify(public_key, msg, sig)
