"""The MCP Inspector CLI (npm `@modelcontextprotocol/inspector`, installed by .ci/run into
~/.cache/toolforge-mcp-inspector, or $MCP_INSPECTOR) against `toolforge serve`: tools/list and
tools/call on rest-spider and slot-spider over stdio and over streamable HTTP. It validates
results with its own schema (it failed with `expected record, received array` when REST results
were bare arrays)."""
import json
import os
import subprocess

import pyarrow.parquet as pq
import pytest

from answers import same

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "target", "release", "toolforge")
INSPECTOR = os.environ.get(
    "MCP_INSPECTOR",
    os.path.expanduser("~/.cache/toolforge-mcp-inspector/node_modules/.bin/mcp-inspector"),
)
pytestmark = pytest.mark.skipif(not os.path.exists(INSPECTOR), reason="MCP Inspector not installed (.ci/run installs it)")


def inspect(target, *args):
    out = subprocess.run([INSPECTOR, "--cli", *target, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr + out.stdout
    return json.loads(out.stdout)


def rest_row():
    return pq.read_table(os.path.join(ROOT, "out", "rest-spider", "data", "dev.parquet")).to_pylist()[0]


def check(target, dataset):
    listed = inspect(target, "--method", "tools/list")["tools"]
    names = {t["name"] for t in listed}
    if dataset == "rest-spider":
        row = rest_row()
        call = row["output"][0]
        name = call["name"] if call["name"] in names else f"{row['db_id']}__{call['name']}"
        args = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in json.loads(call["arguments"]).items()]
        got = inspect(target, "--method", "tools/call", "--tool-name", name, *sum((["--tool-arg", a] for a in args), []))
        assert got["isError"] is False, got
        assert same(json.loads(row["gold_answer"]), got["structuredContent"]["result"], row["ordered"])
    else:
        assert "create_session" in names
        got = inspect(target, "--method", "tools/call", "--tool-name", "create_session", "--tool-arg", "id=slot-spider/3")
        assert got["isError"] is False and got["structuredContent"]["session_id"], got


@pytest.mark.parametrize("dataset", ["rest-spider", "slot-spider"])
def test_inspector_cli_over_stdio(dataset):
    check([BIN, "serve", os.path.join("out", dataset), "--mcp"], dataset)


@pytest.mark.parametrize("dataset", ["rest-spider", "slot-spider"])
def test_inspector_cli_over_streamable_http(dataset):
    proc = subprocess.Popen([BIN, "serve", dataset, "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        base = proc.stdout.readline().strip().split("listening on ")[1]
        check([base + "/mcp", "--transport", "http"], dataset)
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
