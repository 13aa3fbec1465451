"""Dynamo's PGO profile (``TORCH_COMPILE_JOB_ID``) in cachesvc.torch.

torch rewrites one profile key per job after every frame it compiles: the
first write holds the static sizes of the first compile, later ones the
dimensions found dynamic. cachesvc entries are immutable (the first write
wins), so the client writes a profile once, in its last state, when the
process flushes (at exit). Real server; no torch compile needed."""

from __future__ import annotations

from typing import Any

from cachesvc import Client
from cachesvc._failopen import Breaker
from cachesvc.torch._service import Service

PGO = "pt2:dynamo-pgo::job-pgo:None::c1"


def _service(url: str, ns: str) -> Service:
    return Service(Client(url, namespace=ns), timeout=10.0, put_timeout=None, breaker=Breaker(3, 30.0),
                   warn_interval=60.0, components=None, background_uploads=True, upload_queue_bytes=1 << 20,
                   flush_at_exit=10.0)


def test_profile_is_written_once_in_its_last_state(torch_server: Any) -> None:
    a = _service(torch_server.url, "pgo")
    assert a.get(PGO) is None  # the first process of the job: no profile yet
    a.put(PGO, b"profile after frame 0/0: static sizes")
    a.put(PGO, b"profile after frame 0/1: size(1) dynamic")
    assert a.flush(30)
    s = a.stats()
    assert (s["puts"], s["put_created"], s["put_conflicts"]) == (1, 1, 0), s
    # The next process of the job starts from the dynamic profile, and a
    # profile is no compile: nothing is credited as compile time saved.
    b = _service(torch_server.url, "pgo")
    assert b.get(PGO) == b"profile after frame 0/1: size(1) dynamic"
    assert b.stats()["compile_seconds_saved"] == 0.0, b.stats()
