"""A revoked or rotated token (401) pauses the client's calls instead of
storming the server, and a rotated token file ends the pause at once.

Real server with ``--tokens``, rotated by rewriting its tokens file and
sending SIGHUP, as an operator does.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import time
from pathlib import Path

import pytest

import cachesvc

OLD, NEW = "cachesvc_" + "o" * 40, "cachesvc_" + "n" * 40
READER = "cachesvc_" + "r" * 40


def k(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def token_line(name: str, token: str, scope: str) -> str:
    return f"{name} {hashlib.sha256(token.encode()).hexdigest()} {scope}\n"


def rotate(server, tokens: Path, *lines: str) -> None:
    """Rewrites the server's tokens file and reloads it (SIGHUP); returns
    once the server refuses OLD and has logged that refusal, so a test
    counting 401 lines after it does not count the probe's."""
    logged = refused(server)
    tokens.write_text("".join(lines))
    os.kill(server.proc.pid, signal.SIGHUP)
    probe = cachesvc.Client(server.url, token=OLD, retries=0)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            probe.get(k("probe"))
        except cachesvc.Error as e:
            if e.status == 401:
                while refused(server) == logged and time.monotonic() < deadline:
                    time.sleep(0.02)
                return
        time.sleep(0.05)
    raise AssertionError("the server still accepts the old token after SIGHUP")


def refused(server) -> int:
    """Requests the server answered 401 so far (its request log lines)."""
    return sum(1 for line in server.lines if "status=401" in line)


@pytest.fixture
def rotated(start_server, tmp_path: Path):
    """A server whose tokens file held OLD and now holds NEW (and READER,
    read-only), and a client file token_file still holding OLD."""
    tokens = tmp_path / "tokens"
    tokens.write_text(token_line("old", OLD, "default:write"))
    s = start_server(extra=["--tokens", str(tokens)])
    token_file = tmp_path / "token"
    token_file.write_text(OLD + "\n")
    c = cachesvc.Client(s.url, token_file=str(token_file), retries=0)
    assert c.put(k("before"), b"exe").created
    rotate(s, tokens, token_line("new", NEW, "default:write"), token_line("reader", READER, "default:read"))
    return s, c, token_file


def test_401_pauses_every_call_and_warns_once(rotated, caplog):
    s, c, _ = rotated
    before = refused(s)
    codes = []
    with caplog.at_level(logging.WARNING, logger="cachesvc"):
        for i in range(50):
            with pytest.raises(cachesvc.Error) as ei:
                c.get(k(f"storm {i}")) if i % 2 else c.put(k(f"storm {i}"), b"x")
            assert ei.value.status == 401, ei.value
            codes.append(ei.value.code)
    assert codes[0] == "unauthorized" and set(codes[1:]) == {"auth_paused"}, codes
    # Only the first call reached the server (the probe's lines aside).
    for _ in range(50):
        if refused(s) > before:
            break
        time.sleep(0.02)
    assert refused(s) - before == 1, s.log()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "401" in warnings[0] and "CACHESVC_TOKEN_FILE" in warnings[0] and "30 s" in warnings[0], warnings
    assert "re-read as soon as it changes" in warnings[0], warnings


def test_rotated_token_file_ends_the_pause_at_once(rotated):
    s, c, token_file = rotated
    with pytest.raises(cachesvc.Error):
        c.get(k("paused"))
    with pytest.raises(cachesvc.Error) as ei:
        c.get(k("paused"))
    assert ei.value.code == "auth_paused"
    token_file.write_text(NEW + "\n")  # the secret rotated on disk
    assert c.get(k("before")) == b"exe"  # no 30 s wait: the file's change is seen
    assert c.token == NEW


def test_token_file_rotated_before_the_401_is_reread_without_a_pause(rotated):
    s, c, token_file = rotated
    token_file.write_text(NEW + "\n")
    assert c.get(k("before")) == b"exe"  # the 401 made the client look at the file first
    assert c._auth.delay == 0


@pytest.mark.parametrize("has_file", [True, False])
def test_reload_token(rotated, has_file):
    s, c, token_file = rotated
    if not has_file:
        c = cachesvc.Client(s.url, token=OLD, retries=0)
    with pytest.raises(cachesvc.Error):
        c.get(k("paused"))
    if has_file:
        token_file.write_text(NEW + "\n")
        c.reload_token()
    else:
        with pytest.raises(ValueError, match="no token file"):
            c.reload_token()
        c.reload_token(NEW)
    assert c.get(k("before")) == b"exe"


def test_pause_doubles_while_401s_go_on(rotated):
    """Each 401 after a pause ran out pauses twice as long, up to 5 min; a
    success ends the outage (the next 401 pauses 30 s again)."""
    s, c, token_file = rotated
    for want in (30, 60, 120, 240, 300, 300):
        c._auth.until = 0.0  # the pause ran out
        with pytest.raises(cachesvc.Error) as ei:
            c.get(k("doubling"))
        assert ei.value.code == "unauthorized" and c._auth.delay == want, (want, c._auth.delay)
    token_file.write_text(NEW + "\n")
    assert c.get(k("before")) == b"exe"
    token_file.write_text(OLD + "\n")
    c.reload_token()
    with pytest.raises(cachesvc.Error):
        c.get(k("doubling"))
    assert c._auth.delay == 30


def test_403_pauses_nothing(rotated):
    """A token without the scope for a write (403) is refused that write
    only: its lookups go on being sent and answered."""
    s, _, _ = rotated
    c = cachesvc.Client(s.url, token=READER, retries=0)
    for _ in range(3):
        with pytest.raises(cachesvc.Error) as ei:
            c.put(k("no scope"), b"x")
        assert ei.value.status == 403
        assert c.get(k("before")) == b"exe"
