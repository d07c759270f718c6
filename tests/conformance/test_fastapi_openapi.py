"""Conformance: for a handful of generated REST endpoints, build the equivalent FastAPI app
(`@app.get(path, summary=...)` handlers with `name: T = Query(..., description=...)` parameters, as
the papers' servers are written) and compare its `app.openapi()` with toolforge's
`tools/openapi.json`: operationId, parameters (names, `in`, required, schema with type and title,
description), responses and the validation-error components.

No intended difference remains for these fields (`info.title` is the app's own). Our 422 bodies
carry `type`, `loc`, `msg`, `input`, as FastAPI's do for missing and unparsable query parameters."""
import inspect
import json
import os
from typing import Literal, Optional

import pytest
from fastapi import FastAPI, Query

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TYPES = {"string": str, "integer": int, "number": float}


def pick(endpoints):
    """A varied handful: no parameter, one string, one integer, one number, several."""
    chosen = []
    tests = [
        lambda e: not e["parameters"],
        lambda e: [p["kind"] for p in e["parameters"]] == ["string"],
        lambda e: [p["kind"] for p in e["parameters"]] == ["integer"],
        lambda e: "number" in [p["kind"] for p in e["parameters"]],
        lambda e: len(e["parameters"]) >= 2,
        lambda e: len(e["parameters"]) >= 3,
        lambda e: any(p["name"][-1].isdigit() for p in e["parameters"]),
        lambda e: any(p.get("optional") and "default" in p for p in e["parameters"]),
        lambda e: any(p.get("choices") for p in e["parameters"]),
        lambda e: any(p.get("optional") and "default" not in p for p in e["parameters"]),
    ]
    for t in tests:
        e = next((e for e in endpoints if t(e) and e not in chosen), None)
        if e is not None:
            chosen.append(e)
    return chosen


def parameter(p):
    """`name: T = Query(...)`; `Literal[...]` for a string enum; an optional parameter with a
    default is `Query(default)`, one without is `Optional[T] = Query(None)`; a `minimum` is
    `Query(ge=minimum)`."""
    annotation = TYPES[p["kind"]]
    if p.get("choices"):
        annotation = Literal[tuple(p["choices"])]
    default = ...
    if p.get("optional"):
        if "default" in p:
            default = p["default"]
        else:
            default = None
            annotation = Optional[annotation]
    return inspect.Parameter(
        p["name"],
        inspect.Parameter.KEYWORD_ONLY,
        default=Query(default, description=p["description"], ge=p.get("minimum")),
        annotation=annotation,
    )


def fastapi_app(endpoints):
    app = FastAPI(title="t", version="0")
    for ep in endpoints:
        params = [parameter(p) for p in ep["parameters"]]

        async def handler(**kwargs):
            return []

        handler.__signature__ = inspect.Signature(params)
        handler.__name__ = ep["name"]
        app.get(ep["path"], summary=ep["summary"], operation_id=ep["name"])(handler)
    return app


@pytest.mark.parametrize("dataset", ["rest-spider", "rest-bird"])
def test_openapi_matches_fastapi(dataset):
    out = os.path.join(ROOT, "out", dataset, "tools")
    endpoints = json.load(open(os.path.join(out, "endpoints.json")))
    ours = json.load(open(os.path.join(out, "openapi.json")))
    chosen = pick(endpoints)
    assert len(chosen) >= 4, [e["name"] for e in chosen]
    theirs = fastapi_app(chosen).openapi()
    assert ours["openapi"] == theirs["openapi"]
    for ep in chosen:
        assert ours["paths"][ep["path"]] == theirs["paths"][ep["path"]], ep["path"]
    for name, schema in theirs["components"]["schemas"].items():
        assert ours["components"]["schemas"][name] == schema, name
