"""One Arrow type per field across every row and file of every built recipe's trajectories
(issue 29, item 7), pinned: the schema pyarrow infers from each file must be the pinned one below.

Every recipe under `out/` with trajectories (`just test` builds them all: SLOT, SEL, REST and
their variants), every export — `default` (`trajectories/<split>[.faults].jsonl`), `openai`
(`trajectories/openai/`) and `sidecar` (`openai/*.meta.jsonl`) — clean and faulted files read
in 10 MB chunks of lines, as `datasets`' JSON builder reads them. The fields the card declares
`json` (a call's `arguments` and each `tools` entry: objects whose keys depend on the tool) are
held as their JSON text first, which is what `datasets`' `Json` feature stores; every other field
is inferred as it is in the file. A chunk whose inference fails, or whose schema has a field
with another type than the pin (a field all null in a chunk, e.g. the clean files' empty
`faults`, is compatible with any), fails the test. The pins of `default` and `openai` must also
be the features `trajectories/README.md` declares.

Inside the `json` fields, `tools` must still be one type per keyword path across the recipe
(plain JSON inference types it as a struct; what `datasets` 5.x does without the card), and each
`parameters` object states the same keywords: `type`, `properties`, `required`,
`additionalProperties` (`src/emit/trajectories/schema.rs`). A call's `arguments` are exempt:
the value of one argument is a number in one call and text in another (SLOT's `value`), which is
why the card declares them `json`.

A file over `SAMPLE_BYTES` (the seq trajectories: SeqTopV2's train file is 1.6 GB, every line
carrying a 2-60 KB toolkit) is read in `SAMPLE_CHUNKS` of its chunks at an even stride, first and
last included (`TOOLFORGE_ARROW_ALL=1`: every chunk); its lines differ only in their messages and
in which of the recipe's few toolkits they carry."""
import collections
import glob
import io
import json
import os

import pyarrow as pa
import pyarrow.json as paj
import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "out")
RECIPES = sorted(d for d in os.listdir(OUT) if os.path.isfile(os.path.join(OUT, d, "trajectories", "README.md"))) if os.path.isdir(OUT) else []
CHUNK = 10 << 20  # datasets' JsonConfig.chunksize
SAMPLE_BYTES = 200 << 20
SAMPLE_CHUNKS = 12
ALL_CHUNKS = os.environ.get("TOOLFORGE_ARROW_ALL") == "1"

MESSAGE_OPENAI = {
    "messages[].role": "string",
    "messages[].content": "string",
    "messages[].tool_calls[].id": "string",
    "messages[].tool_calls[].type": "string",
    "messages[].tool_calls[].function.name": "string",
    "messages[].tool_calls[].function.arguments": "string",
    "messages[].tool_call_id": "string",
}
FAULTS = {
    "faults[].kind": "string",
    "faults[].call_index": "int64",
    "faults[].tool_call_id": "string",
    "faults[].recovery": "string",
    "faults[].waited_s": "int64",
}
# The pinned schemas: leaf path -> Arrow type (`json` fields as the text `datasets` stores).
PINNED = {
    "default": {"id": "string", **MESSAGE_OPENAI, "messages[].name": "string", "tools[]": "string", "gold_answer": "string", **FAULTS},
    "openai": {**MESSAGE_OPENAI, "tools[]": "string", "parallel_tool_calls": "bool"},
    "sidecar": {"line": "int64", "id": "string", "gold_answer": "string", **FAULTS},
}
PARAMETER_KEYWORDS = {"type", "properties", "required", "additionalProperties"}


def files(recipe, export):
    tdir = os.path.join(OUT, recipe, "trajectories")
    if export == "default":
        return sorted(glob.glob(os.path.join(tdir, "*.jsonl")))
    every = sorted(glob.glob(os.path.join(tdir, "openai", "*.jsonl")))
    return [p for p in every if p.endswith(".meta.jsonl") == (export == "sidecar")]


def as_stored(line):
    """A line with its `json`-declared fields as JSON text (`datasets`' `Json` storage)."""
    if "tools" in line:
        line["tools"] = [json.dumps(t) for t in line["tools"]]
    for m in line.get("messages", []):
        for c in m.get("tool_calls", []):
            if not isinstance(c["function"]["arguments"], str):
                c["function"]["arguments"] = json.dumps(c["function"]["arguments"])
    return line


def chunks(path):
    """The file's lines in chunks of about `CHUNK` bytes, whole lines each; of a file over
    `SAMPLE_BYTES`, `SAMPLE_CHUNKS` of them at an even stride (module docs)."""
    size = os.path.getsize(path)
    if size <= SAMPLE_BYTES or ALL_CHUNKS:
        with open(path, "rb") as f:
            while batch := f.read(CHUNK):
                yield batch + f.readline()
        return
    with open(path, "rb") as f:
        for k in range(SAMPLE_CHUNKS):
            f.seek(k * (size - CHUNK) // (SAMPLE_CHUNKS - 1))
            if k:
                f.readline()  # to the next whole line
            yield f.read(CHUNK) + f.readline()


def config_names(recipe):
    """The card's config names of the exports: the one marked `default: true`, and the other."""
    with open(os.path.join(OUT, recipe, "trajectories", "README.md")) as f:
        configs = yaml.safe_load(f.read().split("---")[1])["configs"]
    return {"default": next(c["config_name"] for c in configs if c.get("default")),
            "openai": next(c["config_name"] for c in configs if not c.get("default"))}


def arrow_leaves(t, path, out):
    """`out[path] = type` for every leaf of Arrow type `t` (a null-typed node is a leaf)."""
    if pa.types.is_struct(t):
        for field in t:
            arrow_leaves(field.type, f"{path}.{field.name}" if path else field.name, out)
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        arrow_leaves(t.value_type, path + "[]", out)
    else:
        out[path] = str(t)


def yaml_leaves(features, path, out):
    """`out[path] = dtype` for every leaf of a card's `features` list (`json` as `string`)."""
    for f in features:
        p = f"{path}.{f['name']}" if path else f["name"]
        if "dtype" in f:
            out[p] = "string" if f["dtype"] == "json" else f["dtype"]
        elif "struct" in f:
            yaml_leaves(f["struct"], p, out)
        elif isinstance(f["list"], str):
            out[p + "[]"] = "string" if f["list"] == "json" else f["list"]
        else:
            yaml_leaves(f["list"], p + "[]", out)


def json_types(v, path, out):
    """`out[path]` gets the JSON type of `v` and of everything under it (list items as `[]`)."""
    kind = "null" if v is None else "bool" if isinstance(v, bool) else "number" if isinstance(v, (int, float)) \
        else "string" if isinstance(v, str) else "list" if isinstance(v, list) else "object"
    out[path][kind] += 1
    if kind == "list":
        for x in v:
            json_types(x, path + "[]", out)
    elif kind == "object":
        for k, x in v.items():
            json_types(x, f"{path}.{k}", out)


def test_there_are_trajectory_files():
    assert RECIPES, "no built recipe with trajectories under out/ (build them first)"


@pytest.mark.parametrize("config", ["default", "openai"])
def test_pins_are_the_features_the_card_declares(config):
    assert RECIPES
    for recipe in RECIPES:
        with open(os.path.join(OUT, recipe, "trajectories", "README.md")) as f:
            header = yaml.safe_load(f.read().split("---")[1])
        declared = {}
        name = config_names(recipe)[config]
        yaml_leaves(next(c for c in header["dataset_info"] if c["config_name"] == name)["features"], "", declared)
        assert declared == PINNED[config], recipe


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("export", ["default", "openai", "sidecar"])
def test_every_file_infers_the_pinned_arrow_schema(recipe, export):
    paths = files(recipe, export)
    assert paths, (recipe, export)
    check_pinned(recipe, export, paths, PINNED[export])


def check_pinned(recipe, export, paths, pinned):
    """Every file of `paths` infers `pinned`, chunk by chunk; `tools` one type per keyword path."""
    wrong, tool_types, parameter_keys = [], collections.defaultdict(collections.Counter), collections.Counter()
    for path in paths:
        for n, batch in enumerate(chunks(path)):
            lines = [json.loads(x) for x in batch.splitlines() if x.strip()]
            for line in lines:
                for t in line.get("tools", []):
                    json_types(t, "", tool_types)
                    parameter_keys[tuple(sorted(t["function"]["parameters"]))] += 1
            text = "\n".join(json.dumps(as_stored(x)) for x in lines).encode()
            try:
                table = paj.read_json(io.BytesIO(text), read_options=paj.ReadOptions(block_size=len(text) + 1))
            except pa.ArrowInvalid as e:
                wrong.append((os.path.basename(path), n, f"inference fails: {e}"))
                continue
            inferred = {}
            arrow_leaves(pa.struct(list(table.schema)), "", inferred)
            for leaf, kind in inferred.items():
                if kind == "null":
                    continue
                if pinned.get(leaf) != kind:
                    wrong.append((os.path.basename(path), n, leaf, kind, pinned.get(leaf)))
    changing = {p: dict(c) for p, c in tool_types.items() if len(set(c) - {"null"}) > 1}
    print(f"{recipe} {export}: {len(paths)} files, fields off the pin {len(wrong)}, "
          f"tools paths with two types {len(changing)}, parameter keyword sets {len(parameter_keys)}")
    assert not wrong, wrong[:10]
    assert not changing, sorted(changing.items())[:10]
    assert not parameter_keys or list(parameter_keys) == [tuple(sorted(PARAMETER_KEYWORDS))], parameter_keys


# The multi-turn dialogue trajectories (issue 45, item 2: `trajectories/dialogue/` of seq-sgd and
# seq-multiwoz): default, OpenAI and the turn-level gold sidecar, pinned the same way; the card
# `trajectories/dialogue/README.md` declares these features (configs `<recipe>-dialogue-<digest>`,
# `…-dialogue-openai-…`, `…-dialogue-gold-…`, in that order).
DIALOGUE_RECIPES = sorted(
    d for d in os.listdir(OUT) if os.path.isfile(os.path.join(OUT, d, "trajectories", "dialogue", "README.md"))
) if os.path.isdir(OUT) else []
PINNED["dialogue"] = {"id": "string", **MESSAGE_OPENAI, "messages[].name": "string", "tools[]": "string"}
PINNED["dialogue_openai"] = PINNED["openai"]
PINNED["dialogue_gold"] = {
    "line": "int64", "id": "string", "turns[].turn": "int64", "turns[].message": "int64",
    "turns[].calls[].name": "string", "turns[].calls[].arguments": "string",
    "turns[].calls[].tool_call_id": "string", "turns[].reply": "string",
}
DIALOGUE_EXPORTS = ["dialogue", "dialogue_openai", "dialogue_gold"]


def dialogue_files(recipe, export):
    ddir = os.path.join(OUT, recipe, "trajectories", "dialogue")
    if export == "dialogue_openai":
        return sorted(glob.glob(os.path.join(ddir, "openai", "*.jsonl")))
    every = sorted(glob.glob(os.path.join(ddir, "*.jsonl")))
    return [p for p in every if p.endswith(".gold.jsonl") == (export == "dialogue_gold")]


def test_there_are_dialogue_trajectory_files():
    assert {"seq-sgd", "seq-multiwoz"} <= set(DIALOGUE_RECIPES), "build seq-sgd and seq-multiwoz first"


@pytest.mark.parametrize("recipe", DIALOGUE_RECIPES)
def test_dialogue_pins_are_the_features_the_card_declares(recipe):
    with open(os.path.join(OUT, recipe, "trajectories", "dialogue", "README.md")) as f:
        header = yaml.safe_load(f.read().split("---")[1])
    names = [c["config_name"] for c in header["configs"]]
    assert [n.rsplit("-", 1)[0] for n in names] == [f"{recipe}-dialogue", f"{recipe}-dialogue-openai", f"{recipe}-dialogue-gold"], names
    assert header["configs"][0].get("default") is True
    for config, export in zip(names, DIALOGUE_EXPORTS):
        declared = {}
        yaml_leaves(next(c for c in header["dataset_info"] if c["config_name"] == config)["features"], "", declared)
        assert declared == PINNED[export], (recipe, export)


@pytest.mark.parametrize("recipe", DIALOGUE_RECIPES)
@pytest.mark.parametrize("export", DIALOGUE_EXPORTS)
def test_every_dialogue_file_infers_the_pinned_arrow_schema(recipe, export):
    paths = dialogue_files(recipe, export)
    assert paths, (recipe, export)
    check_pinned(recipe, export, paths, PINNED[export])
    if export == "dialogue":
        # Every object schema, at every depth of every tool's parameters, states
        # `additionalProperties` and `required` (Command R's template reads them).
        def objects(schema, path):
            if isinstance(schema, dict):
                if schema.get("type") == "object":
                    yield path, schema
                for k, v in schema.items():
                    yield from objects(v, f"{path}.{k}")
            elif isinstance(schema, list):
                for i, v in enumerate(schema):
                    yield from objects(v, f"{path}[{i}]")
        for path in paths:
            with open(path) as f:
                for line in f:
                    for t in json.loads(line)["tools"]:
                        for where, o in objects(t["function"]["parameters"], t["function"]["name"]):
                            assert "additionalProperties" in o and "required" in o, (path, where)
