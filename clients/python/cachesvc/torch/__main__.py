"""``python -m cachesvc.torch``: warm torch.compile's local caches from a Mega-Cache blob.

Run ``python -m cachesvc.torch --help`` for the commands, environment and exit
codes. ``cachesvc warm --torch --run RUN`` runs ``load`` through this CLI.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Sequence

EXIT_OK, EXIT_MISSING, EXIT_USAGE, EXIT_SERVER, EXIT_TORCH = 0, 1, 2, 3, 4

EPILOG = """\
commands:
  load RUN   fetch the Mega-Cache blob of RUN made in this environment (torch and
             Triton versions, device kind and capability) and pre-fill torch's local
             caches with it (torch.compiler.load_cache_artifacts): FX graphs,
             AOTAutograd entries, autotune results, PGO state. Run it before the
             training process starts, with the same TORCHINDUCTOR_CACHE_DIR. The
             training process should call cachesvc.torch.install() if the saving
             process did: torch hashes its remote-cache switches into AOTAutograd keys.
  info RUN   say whether that blob exists, its key and size (fetches nothing).
  check      say whether cachesvc.torch.install() will reach the server with these
             settings: a key (read scope), a lease taken and released (write scope),
             torch's hooks; stores nothing (python -m cachesvc.torch check --help).

  There is no `save`: only the process that compiled holds the artifacts; call
  cachesvc.torch.save(RUN) there, after the first training steps.

environment:
  CACHESVC_URL          server URL (required unless --url)
  CACHESVC_NAMESPACE    namespace (default: default)
  CACHESVC_TOKEN        bearer token; or CACHESVC_TOKEN_FILE, a file whose first line is it
  CACHESVC_VERIFY_KEY   Ed25519 public key(s) the blob must be signed with (comma-separated:
                        any of them; the old and the new during a key rotation)
  CACHESVC_CLIENT_CERT  client certificate (PEM) for a server with --tls-client-ca;
                        CACHESVC_CLIENT_KEY its key, unless the certificate file holds it
  CACHESVC_RUN          default RUN
  CACHESVC_LOOKUP_TIMEOUT  seconds to wait for the server's answer (default 1; 0:
                        only --timeout): a hung server fails fast with exit 3
  TORCHINDUCTOR_CACHE_DIR  the local caches that load fills (torch's default:
                        /tmp/torchinductor_$USER)

exit codes:
  0  loaded (load) / present (info)
  1  no blob for this run in this environment (nothing was changed)
  2  usage error (no run, no server URL, a token file or client certificate that does not load)
  3  the server failed or could not be reached
  4  torch is missing or could not load the blob
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m cachesvc.torch",
        description="Warm torch.compile's local caches from a cachesvc Mega-Cache blob.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["load", "info", "check"])
    p.add_argument("run", nargs="?", help="run id (default $CACHESVC_RUN)")
    p.add_argument("--url", help="server URL (default $CACHESVC_URL)")
    p.add_argument("--namespace", help="namespace (default $CACHESVC_NAMESPACE or default)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds for the whole transfer (default 300); the server's first answer must "
                        "come within $CACHESVC_LOOKUP_TIMEOUT (default 1)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line")
    p.add_argument("-v", "--verbose", action="store_true", help="log torch's and cachesvc's details")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the CLI; returns the exit code (see ``--help``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["check"]:  # its own options and exit codes: cachesvc/_check.py
        from .._check import main as check

        return check(argv, prog="python -m cachesvc.torch", fw="torch")
    from .._check import reject_unknown_options

    p = _parser()
    reject_unknown_options(p, argv)
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if a.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    from .._failopen import Settings

    s = Settings.resolve(a.url, a.namespace, None, a.run)
    run = a.run or _env_run()
    if not run:
        print("cachesvc.torch: no run id (pass RUN or set CACHESVC_RUN)", file=sys.stderr)
        return EXIT_USAGE
    if not s.url:
        print("cachesvc.torch: no server URL (pass --url or set CACHESVC_URL)", file=sys.stderr)
        return EXIT_USAGE
    try:
        import torch  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        print(f"cachesvc.torch: cannot import torch ({type(exc).__name__}: {exc})", file=sys.stderr)
        return EXIT_TORCH
    from . import _mega

    try:
        client = s.client(timeout=a.timeout, retries=2)
    except (ValueError, OSError) as exc:  # a bad token file or client certificate
        print(f"cachesvc.torch: cannot use the configured server: {str(exc).removeprefix('cachesvc: ')}",
              file=sys.stderr)
        return EXIT_USAGE
    if a.command == "info":
        try:
            info = _mega.blob_info(client, run, timeout=a.timeout, first_byte_timeout=s.lookup_timeout)
        except Exception as exc:  # noqa: BLE001
            print(f"cachesvc.torch: info {run}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return EXIT_SERVER
        _out(a.json, info, f"run {run}: {'present' if info['present'] else 'missing'} "
             f"key={info['key']} size={info['size']} environment={_env_text(info['signature'])}")
        return EXIT_OK if info["present"] else EXIT_MISSING
    res = _mega.load_blob(client, run, timeout=a.timeout, first_byte_timeout=s.lookup_timeout)
    doc = {"status": res.status, "run": run, "key": res.key, "size": res.size,
           "seconds": round(res.seconds, 3), "artifacts": res.artifacts, "error": res.error}
    if res.status == _mega.LOADED:
        _out(a.json, doc, f"run {run}: loaded {res.size} bytes in {res.seconds:.2f}s: {res.artifacts}")
        return EXIT_OK
    if res.status == _mega.MISSING:
        # The namespace is named: a blob saved in another one (CACHESVC_NAMESPACE
        # unset here) is the usual reason, beside a different environment.
        _out(a.json, doc, f"run {run}: no Mega-Cache blob in namespace {s.namespace} for this environment "
             f"({_env_text(_mega._keys.mega_signature(run))}); cachesvc.torch.save({run!r}) in the process "
             f"that compiled stores one, in its namespace and for its environment")
        return EXIT_MISSING
    print(f"cachesvc.torch: load {run}: {res.error}", file=sys.stderr)
    if a.json:
        print(json.dumps(doc))
    return EXIT_SERVER if res.status == _mega.SERVER_ERROR else EXIT_TORCH


def _env_run() -> str | None:
    from .._failopen import env

    return env("CACHESVC_RUN")


def _env_text(sig: dict) -> str:
    return " ".join(f"{k}={sig[k]}" for k in ("torch_version", "triton_version", "device", "device_capability")
                    if sig.get(k))


def _out(as_json: bool, doc: dict, text: str) -> None:
    print(json.dumps(doc, default=str) if as_json else text)


if __name__ == "__main__":
    sys.exit(main())
