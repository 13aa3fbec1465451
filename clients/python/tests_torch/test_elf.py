"""The cpp tier's check of served libraries (cachesvc.torch._elf) on a real
shared library of torch and damaged copies of it."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import torch

from cachesvc.torch import _elf

LIB = (Path(torch.__file__).parent / "lib" / "libc10.so").read_bytes()


def _patched(at: int, fmt: str, value: int) -> bytes:
    b = bytearray(LIB)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


CASES = [
    ("sound", LIB, None),
    ("garbage", b"not a library at all, just text" * 4, "not an ELF file"),
    ("empty", b"", "not an ELF file"),
    ("cut to its header", LIB[:64], "truncated: program headers"),
    ("cut in half", LIB[: len(LIB) // 2], "truncated"),
    ("cut inside the section headers", LIB[: struct.unpack_from("<Q", LIB, 40)[0] + 1], "truncated: section headers"),
    ("32-bit class", _patched(4, "B", 1), "ELF class byte 1"),
    ("big-endian", _patched(5, "B", 2), "byte-order byte 2"),
    ("executable, not shared", _patched(16, "<H", 2), "not a shared object"),
    ("other machine", _patched(18, "<H", 183 if _elf._host_machine() != 183 else 62), "built for ELF machine"),
]


@pytest.mark.parametrize("name,data,want", CASES, ids=[c[0] for c in CASES])
def test_problem(name: str, data: bytes, want: str | None) -> None:
    got = _elf.problem(data)
    if want is None:
        assert got is None, (name, got)
    else:
        assert got is not None and want in got, (name, got)
