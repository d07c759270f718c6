"""`toolforge trajectories DIR --format hf|openai|sharegpt -o FILE` writes clean trajectories to FILE
and faulted ones to a sibling `<stem>.faults.jsonl`, never mixed (`--faults` selects the faulted
ones on standard output); `openai` lines hold only OpenAI's keys."""
import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "target", "release", "toolforge")


@pytest.mark.parametrize("fmt", ["hf", "sharegpt"])
def test_fault_and_clean_rows_go_to_separate_files(fmt, tmp_path):
    out = tmp_path / "t.jsonl"
    subprocess.run([BIN, "trajectories", "out/slot-spider", "--format", fmt, "-o", str(out)], cwd=ROOT, check=True)
    clean = [json.loads(l) for l in out.read_text().splitlines()]
    faulted = [json.loads(l) for l in (tmp_path / "t.faults.jsonl").read_text().splitlines()]
    assert clean and faulted
    assert all(t["faults"] == [] for t in clean)
    assert all(t["faults"] for t in faulted)
    only = subprocess.run(
        [BIN, "trajectories", "out/slot-spider", "--format", fmt, "--faults"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    assert len(only) == len(faulted)


def test_openai_format_holds_only_openai_keys(tmp_path):
    out = tmp_path / "t.jsonl"
    subprocess.run([BIN, "trajectories", "out/slot-spider", "--format", "openai", "-o", str(out)], cwd=ROOT, check=True)
    hf = tmp_path / "h.jsonl"
    subprocess.run([BIN, "trajectories", "out/slot-spider", "--format", "hf", "-o", str(hf)], cwd=ROOT, check=True)
    lines = [json.loads(l) for l in out.read_text().splitlines()]
    assert len(lines) == len(hf.read_text().splitlines())
    for t in lines:
        assert list(t) == ["messages", "tools", "parallel_tool_calls"]
        for m in t["messages"]:
            for c in m.get("tool_calls", []):
                assert isinstance(c["function"]["arguments"], str)
                json.loads(c["function"]["arguments"])
