"""The official MCP Python SDK client (PyPI `mcp`) against `toolforge serve`, over stdio
(`serve DIR --mcp`) and over streamable HTTP (`/mcp` of the HTTP server): it lists the tools of
rest-spider and slot-spider, validates every result against the tool's `outputSchema` (the SDK
does this itself and rejects a `structuredContent` that is not an object), calls every gold call
of rest-spider and compares the result with the row's gold answer, and runs 50 SLOT rows through
sessions (`create_session`, then the row's calls with their labels). Under schema drift
(rest-spider-variants, slot-spider-variants) MCP enforces A_new as the HTTP routes do: drifted
endpoints are listed and called under their A_new schema (a verb-evolved endpoint refuses the A_old
flat arguments), and a session opened for a drift row runs that row's A_new tools only."""
import asyncio
import json
import os
import subprocess

import pyarrow.parquet as pq
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

try:  # mcp >= 2 (snake_case models, as .ci/run installs)
    from mcp.client.streamable_http import streamable_http_client as http_client
except ImportError:  # pragma: no cover
    from mcp.client.streamable_http import streamablehttp_client as http_client

from answers import same

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "target", "release", "toolforge")
SLOT_ROWS = 50


def rows(dataset):
    return pq.read_table(os.path.join(ROOT, "out", dataset, "data", "dev.parquet")).to_pylist()


async def all_tools(session):
    tools, cursor = [], None
    while True:
        page = await session.list_tools(cursor=cursor) if cursor else await session.list_tools()
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools


def tool_name(listed, call, db_id):
    """The MCP name of a gold call: the same name as functions.json, or `<db_id>__<name>` where a
    server still qualifies names shared by several databases."""
    if call["name"] in listed:
        return call["name"]
    return f"{db_id}__{call['name']}"


async def check_rest(session):
    listed = {t.name: t for t in await all_tools(session)}
    # 456 endpoints on Spider dev since REST drops what SLOT drops (empty, degenerate, tie-cut
    # and text-order answers; issue 27): 538 before.
    assert len(listed) >= 450, len(listed)
    assert all(t.output_schema and t.output_schema["type"] == "object" for t in listed.values())
    failures, checked = [], 0
    for row in rows("rest-spider"):
        call = row["output"][0]
        result = await session.call_tool(tool_name(listed, call, row["db_id"]), json.loads(call["arguments"]))
        gold = json.loads(row["gold_answer"])
        got = result.structured_content
        if result.is_error or not isinstance(got, dict) or not same(gold, got["result"], row["ordered"]):
            failures.append(row["id"])
        # The text block is the same JSON (MCP: structured content is also serialised as text).
        elif json.loads(result.content[0].text) != got:
            failures.append(row["id"] + " (text)")
        checked += 1
    assert checked > 0
    assert not failures, f"{len(failures)} of {checked} gold calls differ: {failures[:10]}"
    bad = await session.call_tool(next(iter(listed)), {"no_such_argument": 1})
    assert bad.is_error and bad.content[0].text
    return checked


def slot_steps(row):
    """The row's calls after its join step (either shape: `initialization_step` set, or the join
    step as output[0])."""
    calls = row["output"]
    if row.get("initialization_step") is None and calls and calls[0]["name"] == "initialize_active_data":
        calls = calls[1:]
    return calls


def shown_whole(row, calls):
    """Rows whose answer is one column produced by the last call, small enough to be shown whole."""
    gold = json.loads(row["gold_answer"])
    if len(calls) < 2 or not gold or len(gold[0]) != 1 or len(gold) > 50:
        return False
    last = calls[-1]["label"]
    return not any(f"${last}$" in c["arguments"] for c in calls)


async def replay_in_session(session, row, calls):
    """Opens a session for `row`, runs `calls` with their labels, asserts the last output is the
    row's gold answer; returns the session id."""
    opened = await session.call_tool("create_session", {"id": row["id"]})
    assert not opened.is_error, (row["id"], opened.content)
    sid = opened.structured_content["session_id"]
    for c in calls:
        args = dict(json.loads(c["arguments"]), session_id=sid, label=c["label"])
        result = await session.call_tool(c["name"], args)
        assert not result.is_error, (row["id"], c["name"], result.content)
    out = result.structured_content["output"]
    if isinstance(out, dict) and "rows" in out:
        # A table (e.g. `combine_data` over lists of columns): its rows, shown whole.
        assert not out.get("truncated"), (row["id"], out)
        got = out["rows"]
    else:
        got = [[v] for v in (out if isinstance(out, list) else [out])]
    assert same(json.loads(row["gold_answer"]), got, row["ordered"]), row["id"]
    return sid


async def check_slot(session):
    listed = {t.name for t in await all_tools(session)}
    assert {"create_session", "filter_data", "retrieve_data", "aggregate_data"} <= listed, listed
    checked = 0
    for row in rows("slot-spider"):
        calls = slot_steps(row)
        if not shown_whole(row, calls):
            continue
        await replay_in_session(session, row, calls)
        checked += 1
        if checked == SLOT_ROWS:
            break
    assert checked == SLOT_ROWS, checked
    return checked


def drift_rows(dataset):
    out = []
    for row in rows(dataset):
        meta = json.loads(row["meta"]) if row.get("meta") else {}
        if meta.get("variant_kind") == "drift":
            out.append((row, meta))
    return out


async def check_rest_drift(session):
    listed = {t.name: t for t in await all_tools(session)}
    parents = {r["id"]: r for r in rows("rest-spider-variants")}
    checked, refused, failures = 0, 0, []
    for row, meta in drift_rows("rest-spider-variants")[:150]:
        call = row["output"][0]
        name = tool_name(listed, call, row["db_id"])
        assert name in listed, name
        args = json.loads(call["arguments"])
        # The listed input schema is A_new: every A_new argument is a property of it.
        assert set(args) <= set(listed[name].input_schema["properties"]), (name, args)
        result = await session.call_tool(name, args)
        gold = json.loads(row["gold_answer"])
        if result.is_error or not same(gold, result.structured_content["result"], row["ordered"]):
            failures.append(row["id"])
        checked += 1
        old_args = json.loads(parents[meta["variant_of"]]["output"][0]["arguments"])
        if any(isinstance(v, dict) for v in args.values()) and old_args:
            # Verb evolution: the A_old flat arguments are refused.
            old = await session.call_tool(name, old_args)
            assert old.is_error, (row["id"], old_args)
            refused += 1
    assert not failures, f"{len(failures)} of {checked} migrated gold calls differ: {failures[:10]}"
    assert refused > 0
    return checked


async def check_slot_drift(session):
    checked = 0
    for row, meta in drift_rows("slot-spider-variants"):
        calls = slot_steps(row)
        renamed = [c["name"] for c in calls if c["name"].endswith("_v2")]
        if not renamed or not shown_whole(row, calls):
            continue
        sid = await replay_in_session(session, row, calls)
        # The A_old name of a renamed tool does not exist in this row's session ...
        old_name = renamed[0][: -len("_v2")]
        stale = await session.call_tool(old_name, {"session_id": sid, "data_source": "$starting_table_var$"})
        assert stale.is_error and "no tool named" in stale.content[0].text, stale.content
        # ... and the A_new name does not exist in a session of the original row.
        plain = await session.call_tool("create_session", {"id": meta["variant_of"]})
        psid = plain.structured_content["session_id"]
        try:
            r = await session.call_tool(renamed[0], {"session_id": psid})
            refused = r.is_error
        except Exception:  # the SDK raises on a protocol error (unknown tool)
            refused = True
        assert refused, (row["id"], renamed[0])
        checked += 1
        if checked == 20:
            break
    assert checked == 20, checked
    return checked


CHECKS = {
    "rest-spider": check_rest,
    "slot-spider": check_slot,
    "rest-spider-variants": check_rest_drift,
    "slot-spider-variants": check_slot_drift,
}


async def over_stdio(dataset):
    params = StdioServerParameters(command=BIN, args=["serve", os.path.join("out", dataset), "--mcp"], cwd=ROOT)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "toolforge"
            return await CHECKS[dataset](session)


async def over_http(dataset):
    proc = subprocess.Popen([BIN, "serve", dataset, "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "http://" in line, line
        url = line.strip().split("listening on ")[1] + "/mcp"
        async with http_client(url) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await CHECKS[dataset](session)
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


@pytest.mark.parametrize("dataset", sorted(CHECKS))
def test_mcp_sdk_client_over_stdio(dataset):
    assert asyncio.run(over_stdio(dataset)) > 0


@pytest.mark.parametrize("dataset", sorted(CHECKS))
def test_mcp_sdk_client_over_streamable_http(dataset):
    assert asyncio.run(over_http(dataset)) > 0
