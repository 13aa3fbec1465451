"""api/openapi.json: a valid OpenAPI 3.1 document whose operations carry what clients rely on.

No server is started: these tests read the document only.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

import pytest
from openapi_spec_validator import OpenAPIV31SpecValidator, validate

from conftest import ROOT

DOC_PATH = ROOT / "api" / "openapi.json"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
ACCESS = {"public", "read", "write", "admin", "read:*", "admin:*", "token"}
CODE_RE = re.compile(r"^[a-z][a-z0-9_]*$")


@pytest.fixture(scope="module")
def text() -> str:
    return DOC_PATH.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def doc(text: str) -> dict[str, Any]:
    return json.loads(text)


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method in METHODS:
            if method in item:
                yield method.upper(), path, item[method]


def resolve(doc: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    """Follows local $refs ("#/components/...") to the object they name."""
    seen = set()
    while "$ref" in obj:
        ref = obj["$ref"]
        assert ref.startswith("#/"), f"non-local $ref {ref}"
        assert ref not in seen, f"$ref cycle at {ref}"
        seen.add(ref)
        obj = doc
        for part in ref[2:].split("/"):
            obj = obj[part.replace("~1", "/").replace("~0", "~")]
    return obj


def test_valid_openapi_31(doc: dict[str, Any]) -> None:
    assert doc["openapi"].startswith("3.1."), doc["openapi"]
    validate(doc, cls=OpenAPIV31SpecValidator)


def test_json_with_two_space_indent(text: str, doc: dict[str, Any]) -> None:
    assert text == json.dumps(doc, indent=2, ensure_ascii=False) + "\n", \
        "api/openapi.json must be formatted as json.dumps(indent=2, ensure_ascii=False) plus a final newline"


def test_every_operation_is_described(doc: dict[str, Any]) -> None:
    ids: dict[str, str] = {}
    problems = []
    for method, path, op in operations(doc):
        where = f"{method} {path}"
        op_id = op.get("operationId")
        if not op_id:
            problems.append(f"{where}: no operationId")
        elif op_id in ids:
            problems.append(f"{where}: operationId {op_id!r} also used by {ids[op_id]}")
        else:
            ids[op_id] = where
        if not str(op.get("summary", "")).strip():
            problems.append(f"{where}: no summary")
        access = op.get("x-cachesvc-access")
        if access not in ACCESS:
            problems.append(f"{where}: x-cachesvc-access {access!r} is not one of {sorted(ACCESS)}")
        # The security requirement says the same as the access rule.
        sec = op.get("security")
        if access == "public" and sec != []:
            problems.append(f"{where}: public but security is {sec!r}, want []")
        if access in ACCESS - {"public"} and not (sec and all("bearer" in s for s in sec)):
            problems.append(f"{where}: access {access!r} but security {sec!r} does not require bearer")
    assert not problems, "\n".join(problems)
    assert len(ids) >= 20, f"only {len(ids)} operations"


def test_every_error_response_lists_its_codes(doc: dict[str, Any]) -> None:
    problems = []
    for method, path, op in operations(doc):
        for status, resp in op["responses"].items():
            if not (status.startswith("4") or status.startswith("5")):
                continue
            codes = resolve(doc, resp).get("x-error-codes")
            where = f"{method} {path} {status}"
            if not isinstance(codes, list) or not codes:
                problems.append(f"{where}: no x-error-codes list")
                continue
            for c in codes:
                if not isinstance(c, str) or not CODE_RE.match(c):
                    problems.append(f"{where}: error code {c!r} is not snake_case")
            if len(set(codes)) != len(codes):
                problems.append(f"{where}: duplicate codes in {codes}")
    for name, resp in doc["components"].get("responses", {}).items():
        if not resp.get("x-error-codes"):
            problems.append(f"components/responses/{name}: no x-error-codes")
    assert not problems, "\n".join(problems)


def test_non_public_operations_share_auth_responses(doc: dict[str, Any]) -> None:
    """401 (and 403 where a scope is needed) come from the shared components."""
    problems = []
    for method, path, op in operations(doc):
        access, rs = op["x-cachesvc-access"], op["responses"]
        want = set() if access == "public" else {"401"} if access == "token" else {"401", "403"}
        for status in ("401", "403"):
            if (status in rs) != (status in want):
                problems.append(f"{method} {path}: {status} {'missing' if status in want else 'unexpected'} for {access!r}")
            elif status in rs and "$ref" not in rs[status]:
                problems.append(f"{method} {path}: {status} should reference components/responses")
        if "500" not in rs:
            problems.append(f"{method} {path}: no 500")
    assert not problems, "\n".join(problems)
