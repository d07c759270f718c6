"""Issue 45, items 1 and 4: every seq recipe writes a trajectory for every kept row of every split,
and the cards of the datasets without trajectories say why.

Judged from the files alone, by this test's own reading of them (pyarrow for the Parquet rows,
`json` for the lines): per recipe and split, the kept rows (`data/<split>.parquet`) and the
trajectories (`trajectories/<split>.jsonl` lines) are counted, printed and must be equal, with the
same ids in the same order. Each trajectory is checked against its row:

- system message first, then the user message = the row's `input`;
- the assistant `tool_calls`, flattened, are the row's `output` calls in order (name and
  arguments), with the OpenAI export's calls equal to them;
- a call passing `"$L$"` comes after the tool message of the call labelled `L` (the TopV2 nested
  intents); every tool message holds only `{"label": …}` of its call (no invented result) and
  answers a call of the assistant message before it;
- the trajectory ends with an assistant message of calls: no tool result, no final answer;
- `tools` holds every tool of the row, each with the full JSON Schema of `tools/functions.json`
  (same properties, types and required), never a bare name — and the row's own `tools` column
  carries the full specs too.

The lines are read with `json.JSONDecoder.raw_decode` up to `"tools"`; each distinct `tools`
text (a handful per recipe: one per toolkit) is parsed once, so the ~3 GB of seq trajectories are
checked in well under a minute. `TOOLFORGE_SEQ_RECIPES` (space-separated) restricts the recipes.
"""
import glob
import json
import os
import re

import pyarrow.parquet as pq
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "out")
SEQ = os.environ.get("TOOLFORGE_SEQ_RECIPES", "seq-atis seq-snips seq-topv2 seq-sgd seq-multiwoz").split()
BUILT = [r for r in SEQ if os.path.isfile(os.path.join(OUT, r, "MANIFEST.json"))]
ID = re.compile(r'^\{"id":("(?:[^"\\]|\\.)*")')
DECODER = json.JSONDecoder()


def splits(recipe):
    return sorted(os.path.basename(p)[: -len(".parquet")] for p in glob.glob(os.path.join(OUT, recipe, "data", "*.parquet")))


def label_of(value):
    if isinstance(value, str) and len(value) > 2 and value[0] == "$" and value[-1] == "$":
        return value[1:-1]
    return None


def labels_in(arguments):
    out = []
    for v in arguments.values():
        for x in v if isinstance(v, list) else [v]:
            if label_of(x):
                out.append(label_of(x))
    return out


def split_line(line):
    """(id, messages, tools text) of a default-export line, without parsing `tools`."""
    head = '{"id":'
    assert line.startswith(head), line[:80]
    tid, at = DECODER.raw_decode(line, len(head))
    assert line.startswith(',"messages":', at), line[at: at + 40]
    messages, at = DECODER.raw_decode(line, at + len(',"messages":'))
    assert line.startswith(',"tools":', at)
    tail = line.rindex(',"gold_answer":')
    return tid, messages, line[at + len(',"tools":'): tail], json.loads("{" + line[tail + 1:])


OPENAI_KEYS = {"system": {"role", "content"}, "user": {"role", "content"},
               "assistant": {"role", "content", "tool_calls"}, "tool": {"role", "tool_call_id", "content"}}


def split_openai(line):
    """(messages, tools text, parallel_tool_calls) of an OpenAI-export line (only those three
    keys, in that order), without parsing `tools`."""
    head = '{"messages":'
    assert line.startswith(head), line[:80]
    messages, at = DECODER.raw_decode(line, len(head))
    assert line.startswith(',"tools":', at)
    tail = line.rindex(',"parallel_tool_calls":')
    parallel = json.loads(line[tail + len(',"parallel_tool_calls":'):].strip()[:-1])
    return messages, line[at + len(',"tools":'): tail], parallel


def object_schemas_state_additional_properties(schema, path, bad):
    if isinstance(schema, dict):
        typed = schema.get("type") == "object" or (isinstance(schema.get("type"), list) and "object" in schema["type"])
        if (typed or "properties" in schema) and "additionalProperties" not in schema:
            bad.append(path)
        for k, v in schema.items():
            object_schemas_state_additional_properties(v, f"{path}.{k}", bad)
    elif isinstance(schema, list):
        for i, v in enumerate(schema):
            object_schemas_state_additional_properties(v, f"{path}[{i}]", bad)


def test_every_seq_recipe_is_built():
    assert BUILT == SEQ, f"build them first: missing {sorted(set(SEQ) - set(BUILT))}"


@pytest.mark.parametrize("recipe", BUILT)
def test_one_trajectory_per_kept_row_in_every_split(recipe):
    for split in splits(recipe):
        rows = pq.read_table(os.path.join(OUT, recipe, "data", split + ".parquet"), columns=["id"]).column("id").to_pylist()
        path = os.path.join(OUT, recipe, "trajectories", split + ".jsonl")
        assert os.path.isfile(path), path
        with open(path) as f:
            ids = [json.loads(ID.match(line).group(1)) for line in f]
        print(f"{recipe} {split}: kept rows {len(rows)}, trajectories {len(ids)}")
        assert len(ids) == len(rows), (recipe, split)
        assert ids == rows, (recipe, split)
        assert not glob.glob(os.path.join(OUT, recipe, "trajectories", split + ".faults.jsonl")), "no faults without a back end"


@pytest.mark.parametrize("recipe", BUILT)
def test_trajectories_are_the_rows_calls_with_full_schemas_and_no_invented_result(recipe):
    with open(os.path.join(OUT, recipe, "tools", "functions.json")) as f:
        catalog = {t["function"]["name"]: t["function"] for t in json.load(f)}
    problems, counted = [], {"trajectories": 0, "calls": 0, "tool_messages": 0, "toolkits": 0}
    for split in splits(recipe):
        table = pq.read_table(os.path.join(OUT, recipe, "data", split + ".parquet"),
                              columns=["id", "input", "output", "tools"], read_dictionary=["tools"])
        ids, inputs, outputs = (table.column(c).to_pylist() for c in ("id", "input", "output"))
        row_tools = table.column("tools").combine_chunks()
        toolkit_names = {}
        for text in row_tools.dictionary.to_pylist():
            kit = json.loads(text)
            for t in kit:
                if set(t) < {"name"} | {"description", "parameters"} or "parameters" not in t:
                    problems.append(("row tools without a schema", split, t.get("name")))
                elif t["parameters"] != catalog[t["name"]]["parameters"]:
                    problems.append(("row tool differs from functions.json", split, t["name"]))
            toolkit_names[text] = [t["name"] for t in kit]
        row_kits = [toolkit_names[row_tools.dictionary[i].as_py()] for i in row_tools.indices.to_pylist()]
        checked_tools = {}
        openai = open(os.path.join(OUT, recipe, "trajectories", "openai", split + ".jsonl"))
        with open(os.path.join(OUT, recipe, "trajectories", split + ".jsonl")) as f:
            for n, line in enumerate(f):
                tid, messages, tools_text, rest = split_line(line)
                o_messages, o_tools, parallel = split_openai(next(openai))
                for m in o_messages:
                    if set(m) - OPENAI_KEYS[m["role"]]:
                        problems.append(("openai message keys", where, sorted(m)))
                if parallel != any(len(m.get("tool_calls") or []) > 1 for m in o_messages):
                    problems.append(("parallel_tool_calls", where, parallel))
                where = (split, tid)
                counted["trajectories"] += 1
                if tid != ids[n]:
                    problems.append(("order", where))
                    continue
                if rest != {"gold_answer": None, "faults": []}:
                    problems.append(("gold_answer/faults", where, rest))
                if tools_text not in checked_tools:
                    tools = json.loads(tools_text)
                    counted["toolkits"] += 1
                    for t in tools:
                        fn = t["function"]
                        spec = catalog.get(fn["name"])
                        if spec is None or set(fn["parameters"].get("properties", {})) != set(spec["parameters"].get("properties", {})):
                            problems.append(("tool schema not the catalog's", fn["name"]))
                            continue
                        for p, s in spec["parameters"]["properties"].items():
                            shown = fn["parameters"]["properties"][p]
                            if shown.get("type") != s.get("type") or shown.get("anyOf", [None])[0:1] != s.get("anyOf", [None])[0:1]:
                                problems.append(("property type", fn["name"], p))
                        if sorted(fn["parameters"].get("required", [])) != sorted(spec["parameters"].get("required", [])):
                            problems.append(("required", fn["name"]))
                        bad = []
                        object_schemas_state_additional_properties(fn["parameters"], fn["name"], bad)
                        problems += [("additionalProperties missing", b) for b in bad]
                    checked_tools[tools_text] = [t["function"]["name"] for t in tools]
                if checked_tools[tools_text] != row_kits[n]:
                    problems.append(("toolkit is not the row's", where))
                if o_tools != tools_text:
                    problems.append(("openai tools", where))
                # Messages: system, user = input, then calls.
                if [m["role"] for m in messages[:2]] != ["system", "user"] or messages[1]["content"] != inputs[n]:
                    problems.append(("head", where))
                    continue
                labels = {c["label"] for c in outputs[n]}
                by_call = {}  # call id -> its label, from the row's output in order
                calls, answered, pending = [], set(), set()
                last_assistant = None
                for i, m in enumerate(messages[2:], start=2):
                    if m["role"] == "assistant":
                        if not m.get("tool_calls"):
                            problems.append(("assistant without calls (an answer)", where))
                        if pending:
                            problems.append(("calls of an earlier message unanswered", where))
                        for c in m.get("tool_calls") or []:
                            f_ = c["function"]
                            for label in labels_in(f_["arguments"]):
                                if label not in answered:
                                    problems.append(("consumer before its producer's tool message", where, label))
                            if len(calls) < len(outputs[n]):
                                by_call[c["id"]] = outputs[n][len(calls)]["label"]
                            calls.append((f_["name"], f_["arguments"]))
                            pending.add(c["id"])
                        last_assistant = i
                    elif m["role"] == "tool":
                        counted["tool_messages"] += 1
                        if m["tool_call_id"] not in pending:
                            problems.append(("tool message answering no call of the message before", where))
                            continue
                        pending.discard(m["tool_call_id"])
                        content = json.loads(m["content"])
                        if content != {"label": by_call.get(m["tool_call_id"])}:
                            problems.append(("tool message is not its call's label alone", where, m["content"]))
                        answered.add(content.get("label"))
                    else:
                        problems.append(("role", where, m["role"]))
                if last_assistant != len(messages) - 1:
                    problems.append(("does not end with the calls", where))
                gold = [(c["name"], json.loads(c["arguments"])) for c in outputs[n]]
                if calls != gold:
                    problems.append(("calls are not the row's output in order", where, calls, gold))
                if not answered <= labels:
                    problems.append(("tool message names a label no call has", where))
                ocalls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                          for m in o_messages for c in m.get("tool_calls") or []]
                if ocalls != gold:
                    problems.append(("openai calls", where))
                counted["calls"] += len(calls)
        openai.close()
    print(f"{recipe}: {counted}, problems {len(problems)}")
    assert not problems, problems[:10]


CARD_NO_TRAJECTORIES = {"bfcl": "evaluation set", "mcp-tools": "no executable back end"}


@pytest.mark.parametrize("recipe", sorted(CARD_NO_TRAJECTORIES))
def test_cards_without_trajectories_say_why(recipe):
    card = os.path.join(OUT, recipe, "README.md")
    if not os.path.isfile(card):
        pytest.skip(f"{recipe} not built")
    text = open(card).read()
    assert "This dataset has no trajectories" in text and CARD_NO_TRAJECTORIES[recipe] in text, recipe
    assert not os.path.isdir(os.path.join(OUT, recipe, "trajectories"))


@pytest.mark.parametrize("recipe", BUILT)
def test_seq_cards_say_the_trajectories_end_with_the_calls_and_why(recipe):
    for card in ("README.md", os.path.join("trajectories", "README.md")):
        text = open(os.path.join(OUT, recipe, card)).read()
        assert "The trajectory ends with the calls: no tool result and no final answer." in text, card
        assert "no executable back end" in text, card
        assert "### Lengths" in text and "| split | trajectories | p50 | p90 | p99 | max |" in text, card
