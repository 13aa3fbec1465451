"""``python -m cachesvc.jax check`` (and ``cachesvc.torch``): does this
environment reach the cache?

``install()`` fails open: a wrong URL, token or namespace costs a training
job one warning and every hit, and nothing else says so. ``check`` resolves
the settings exactly as ``install()`` does (``CACHESVC_*`` variables,
overridden by ``--url`` and ``--namespace``), then asks the server what the
job will ask: a key (read scope) and a compile lease taken and released at
once (write scope, which only the processes that store compiles need), and
whether this Python has the framework ``install()`` hooks. Nothing is
stored.
"""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import sys
from typing import Sequence

EXIT_OK, EXIT_USAGE, EXIT_SERVER, EXIT_FRAMEWORK = 0, 2, 3, 4

# The key check asks for and leases: a passthrough signature that no
# compile produces, so the lease never stands in a real compile's way.
_PROBE = {"backend": "passthrough", "kind": "jax", "key": "jit_cachesvc_check-" + "0" * 64}

EPILOG = """\
commands:
  check   resolve the settings as cachesvc.{fw}.install() does and ask the server
          what a training job will: a key (needs read scope in the namespace) and
          a compile lease, released at once (write scope: only the processes that
          store compiles need it{writer_note}). Stores nothing. Prints what it found,
          and with a failure what to change.

environment (what install() reads):
  CACHESVC_URL          server URL, e.g. http://cache:8080 (required unless --url)
  CACHESVC_NAMESPACE    namespace (default: default)
  CACHESVC_TOKEN        bearer token; or CACHESVC_TOKEN_FILE, a file whose first line is it
  CACHESVC_VERIFY_KEY   Ed25519 public key(s) an entry must be signed with; during a
                        key rotation the old and the new, separated by a comma
  CACHESVC_CLIENT_CERT  client certificate (PEM) for a server with --tls-client-ca;
                        CACHESVC_CLIENT_KEY its key, unless the certificate file holds it
  CACHESVC_RUN          run id tagged on requests (default <host>-<pid>-<random>;
                        torchrun-<job id> in a torchrun rank)
{mode}  CACHESVC_LOOKUP_TIMEOUT  seconds to wait for the server's answer (default 1)

exit codes:
  0  the server answers and the token reads the namespace (write may be refused: said so)
  2  a setting cannot be used (no URL, a malformed URL or namespace, a token file or
     client certificate that does not load)
  3  the server could not be reached, or refused to read (token, scope)
  4  the server is ready, but install() installs nothing in this Python (no {name},
     or one without the hooks it needs)
"""

# What differs between the frameworks' checks: the name printed, who writes,
# and the variables only one of them reads.
_FRAMEWORKS = {
    "jax": {"name": "JAX", "writer": "JAX process 0",
            "mode": "  CACHESVC_MODE         canonical (default) or jax-key\n"},
    "torch": {"name": "torch", "writer": "", "mode": ""},
}


def _parser(prog: str, fw: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Check that this environment reaches the cachesvc server the way "
                               f"cachesvc.{fw}.install() will.",
        epilog=EPILOG.format(fw=fw, writer_note=_note(": ", _FRAMEWORKS[fw]["writer"], ""), **_FRAMEWORKS[fw]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["check"])
    p.add_argument("--url", help="server URL (default $CACHESVC_URL)")
    p.add_argument("--namespace", help="namespace (default $CACHESVC_NAMESPACE or default)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds for each request (default 10)")
    p.add_argument("--json", action="store_true", help="print the findings as one JSON line")
    return p


def reject_unknown_options(p: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """Exits through ``p.error`` (status 2) naming the first option ``p``
    does not know, and the one it most likely meant: argparse itself says
    "unrecognized arguments", or, for one before the command, takes its
    value for the command ("invalid choice: 'http://x:1'")."""
    known = [o for a in p._actions for o in a.option_strings]
    for arg in argv:
        if arg == "--":
            return
        name = arg.split("=", 1)[0]
        if name.startswith("--") and name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            p.error(f"unknown option {name}" + (f" (did you mean {close[0]}?)" if close else ""))


def main(argv: Sequence[str] | None = None, prog: str = "python -m cachesvc.jax", fw: str = "jax") -> int:
    """Runs the CLI of framework ``fw`` (``jax`` or ``torch``); returns the
    exit code (see ``--help``)."""
    p = _parser(prog, fw)
    if not argv:
        p.print_usage(sys.stderr)
        print(f"{prog}: give a command: {prog} check (see --help)", file=sys.stderr)
        return EXIT_USAGE
    reject_unknown_options(p, argv)
    a = p.parse_args(argv)
    # The client's warnings are a training job's (one line, then paused
    # calls); here every finding is printed once, with what to do.
    logging.getLogger("cachesvc").setLevel(logging.CRITICAL)
    from . import Error
    from ._failopen import NAMESPACE_RE, Settings, env

    s = Settings.resolve(a.url, a.namespace)
    found: dict[str, object] = {"server": s.url, "namespace": s.namespace, "run": s.run}

    def fail(code: int, msg: str) -> int:
        if a.json:
            print(json.dumps({**found, "ok": False, "error": msg}))
        print(f"{prog} check: {msg}", file=sys.stderr)
        return code

    if not s.url:
        return fail(EXIT_USAGE, "no server URL: pass --url or set CACHESVC_URL (e.g. http://cache:8080)")
    if not NAMESPACE_RE.fullmatch(s.namespace):  # named with its flag or variable, before client()
        src = "--namespace" if a.namespace else "CACHESVC_NAMESPACE"
        return fail(EXIT_USAGE, f'namespace "{s.namespace}" ({src}) is invalid: use 1 to 63 characters of '
                                "a-z, 0-9, '.', '_' or '-', starting with a letter or digit")
    try:
        c = s.client(timeout=a.timeout, retries=0)
    except (ValueError, OSError) as exc:
        return fail(EXIT_USAGE, f"{str(exc).removeprefix('cachesvc: ')} (check CACHESVC_URL, CACHESVC_TOKEN_FILE, "
                                "CACHESVC_VERIFY_KEY, CACHESVC_CLIENT_CERT and CACHESVC_CLIENT_KEY)")
    found["token"] = ("CACHESVC_TOKEN" if s.token else
                      f"CACHESVC_TOKEN_FILE ({s.token_file})" if s.token_file else "none")
    found["verify_keys"] = len(c._verify_keys or ())
    try:
        r = c._request("GET", c._prefix + "/healthz", ok=(200,))
        health = json.loads(r.read_all(limit=1 << 16) or b"{}")
        found["version"] = str(health.get("version", "")) if isinstance(health, dict) else ""
        c.key(_PROBE)
        found["read"] = "ok"
    except Error as e:
        return fail(EXIT_SERVER, _what_to_do(e))
    found["write"] = _write(c, _FRAMEWORKS[fw]["writer"])
    found[fw], usable = _jax(env("CACHESVC_MODE", "canonical") or "canonical") if fw == "jax" else _torch()
    code = EXIT_OK if usable else EXIT_FRAMEWORK
    if a.json:
        print(json.dumps({**found, "ok": usable}))
        return code
    rows = [("server", f"{s.url} (cachesvc {found['version'] or 'version unknown'})"),
            ("namespace", s.namespace), ("token", found["token"]), ("verify", _verify_row(c._verify_keys)),
            ("read", "ok"),
            ("write", found["write"]), (fw, found[fw]), ("run", s.run)]
    for name, value in rows:
        print(f"{name:<10} {value}")
    if not usable:
        print(f"The server is ready, but cachesvc.{fw}.install() installs nothing in this Python (see {fw}).")
        return code
    print(f"cachesvc.{fw}.install() will use this server.")
    return code


def _verify_row(keys: list[bytes] | None) -> str:
    """How many keys the client trusts: during a key rotation each host must
    show 2 before the servers' --signing-key changes."""
    if not keys:
        return "none (entries are not checked: CACHESVC_VERIFY_KEY is unset)"
    if len(keys) == 1:
        return "1 key (an entry must be signed with it)"
    return f"{len(keys)} keys (an entry signed by any of them is accepted)"


def _write(c, writer: str) -> str:
    """Takes and releases a compile lease on the probe key: 'ok', or what the
    server refused and what it costs."""
    from . import Error

    try:
        lease = c.lease(c.key(_PROBE).key, ttl=5, renew=False)
        lease.acquire()
        lease.release()
        return "ok"
    except Error as e:
        return (f"refused ({e.code}, {e.status}: {e.message}): lookups still work, but this token's compiles "
                f"are not stored; the processes that store them{_note(' (', writer, ')')} need a token with "
                "write scope")


def _jax(mode: str) -> tuple[str, bool]:
    """JAX's version and whether it has the hooks install() needs: what to
    print, and whether install() would install anything."""
    try:
        import jax
        from jax._src import cache_key as ck
        from jax._src import compilation_cache as cc
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return f"not importable ({type(exc).__name__}: {exc}): install() does nothing without JAX", False
    missing = [f"compilation_cache.{n}" for n in ("reset_cache", "_cache") if not hasattr(cc, n)]
    if missing:
        return f"{jax.__version__}, lacks {', '.join(missing)}: install() does nothing with this JAX", False
    if mode == "canonical" and not callable(getattr(ck, "get", None)):
        return f"{jax.__version__}, lacks cache_key.get: install() falls back to mode jax-key", True
    return f"{jax.__version__}, hooks present; mode {mode}", True


def _what_to_do(e) -> str:
    """The error of a read, with what to change for the usual causes."""
    msg = str(e)
    if e.status == 401:
        return (f"{msg}; give a token the server's --tokens file lists: CACHESVC_TOKEN_FILE (a file whose "
                "first line is the token) or CACHESVC_TOKEN")
    if e.status == 403:
        return f"{msg}; use a token with read scope there, or set CACHESVC_NAMESPACE to a namespace it reads"
    return msg


def _note(before: str, text: str, after: str) -> str:
    """text between before and after, or "" when there is no text."""
    return before + text + after if text else ""


def _torch() -> tuple[str, bool]:
    """torch's version and whether it has the remote-cache hook install()
    needs most (the FX graph cache's backend_override_cls)."""
    try:
        import torch
        from torch._inductor import remote_cache as rc
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return f"not importable ({type(exc).__name__}: {exc}): install() does nothing without torch", False
    cls = getattr(rc, "RemoteFxGraphCache", None)
    if cls is None or not hasattr(cls, "backend_override_cls"):
        return (f"{torch.__version__}, lacks remote_cache.RemoteFxGraphCache.backend_override_cls: "
                "install() cannot route its caches"), False
    return f"{torch.__version__}, hooks present", True


if __name__ == "__main__":  # pragma: no cover - python -m cachesvc._check
    sys.exit(main(sys.argv[1:]))
