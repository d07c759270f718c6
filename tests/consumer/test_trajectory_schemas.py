"""Issue 45, item 6: what trainers tripped on in the trajectories, judged over every built recipe.

- Every tool schema of every trajectory file states `additionalProperties` on every object schema
  at every depth: Command R+'s template renders each parameter with a `json_to_python_type` macro
  that, for `{"type": "object"}`, recurses into `json_spec.additionalProperties` and reads its
  `.type` — an undefined attribute of an undefined value, `UndefinedError`, on every SLOT and SEL
  row (`operation_args`). Checked twice: a walk of every schema, and that macro's recursion
  (written here from its published behaviour: `object` → `additionalProperties`, `array` →
  `items`) rendered with jinja2's sandbox, as `transformers` renders templates, for every tool.
- No recipe holds two rows identical in everything but `id` and `meta` (slot-spider-variants held
  361: a `shortlist-10` equal to its `shortlist-25`), in its Parquet rows nor in its trajectories.

Each distinct `tools` text is checked once (a recipe has a handful to a few thousand), so the
seq recipes' gigabytes of lines cost one pass each.
"""
import collections
import glob
import hashlib
import json
import os

import pyarrow.parquet as pq
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "out")
BUILT = sorted(d for d in os.listdir(OUT) if os.path.isfile(os.path.join(OUT, d, "MANIFEST.json"))) if os.path.isdir(OUT) else []
WITH_TRAJECTORIES = [d for d in BUILT if os.path.isfile(os.path.join(OUT, d, "trajectories", "README.md"))]
DECODER = json.JSONDecoder()

# The parameter-type recursion of Command R+'s tool-use template, reduced to what it reads.
MACRO = """{%- macro json_to_python_type(json_spec) -%}
{%- set basic_type_map = {"string": "str", "number": "float", "integer": "int", "boolean": "bool"} -%}
{%- if basic_type_map[json_spec.type] is defined -%}{{ basic_type_map[json_spec.type] }}
{%- elif json_spec.type == "array" -%}{{ "List[" + json_to_python_type(json_spec.items) + "]" }}
{%- elif json_spec.type == "object" -%}{{ "Dict[str, " + json_to_python_type(json_spec.additionalProperties) + "]" }}
{%- else -%}Any{%- endif -%}
{%- endmacro -%}
{%- for name, spec in parameters.properties|items %}{{ name }}: {{ json_to_python_type(spec) }}
{% endfor %}"""
TEMPLATE = ImmutableSandboxedEnvironment().from_string(MACRO)


def tools_texts(path):
    """Each distinct `tools` text of a default-export trajectory file, with how many lines carry it."""
    seen = collections.Counter()
    with open(path) as f:
        for line in f:
            _, at = DECODER.raw_decode(line, len('{"id":'))
            _, at = DECODER.raw_decode(line, at + len(',"messages":'))
            assert line.startswith(',"tools":', at), path
            seen[line[at + len(',"tools":'): line.rindex(',"gold_answer":')]] += 1
    return seen


def unstated(schema, path, out):
    if isinstance(schema, dict):
        t = schema.get("type")
        if (t == "object" or (isinstance(t, list) and "object" in t) or "properties" in schema) and "additionalProperties" not in schema:
            out.append(path)
        for k, v in schema.items():
            unstated(v, f"{path}.{k}", out)
    elif isinstance(schema, list):
        for i, v in enumerate(schema):
            unstated(v, f"{path}[{i}]", out)


@pytest.mark.parametrize("recipe", WITH_TRAJECTORIES)
def test_every_object_schema_states_additional_properties_and_command_r_renders_every_tool(recipe):
    texts = collections.Counter()
    for path in sorted(glob.glob(os.path.join(OUT, recipe, "trajectories", "*.jsonl"))):
        texts.update(tools_texts(path))
    missing, failing, tools = [], [], 0
    for text, lines in texts.items():
        for t in json.loads(text):
            tools += 1
            fn = t["function"]
            before = len(missing)
            unstated(fn["parameters"], fn["name"], missing)
            try:
                TEMPLATE.render(parameters=fn["parameters"])
            except Exception as e:  # noqa: BLE001 — the template's error is the finding
                failing.append((fn["name"], lines, f"{type(e).__name__}: {e}"))
            if len(missing) > before:
                missing[before:] = [(m, lines) for m in missing[before:]]
    print(f"{recipe}: {len(texts)} distinct toolkits, {tools} tool schemas; object schemas without "
          f"additionalProperties {len(missing)}, Command R+-style render failures {len(failing)}")
    assert not missing, missing[:5]
    assert not failing, failing[:5]


def row_key(row):
    row = dict(row)
    row.pop("id"), row.pop("meta", None)
    return hashlib.blake2b(json.dumps(row, sort_keys=True).encode(), digest_size=16).digest()


@pytest.mark.parametrize("recipe", BUILT)
def test_no_two_rows_are_identical_but_for_id_and_meta(recipe):
    dups = {}
    for path in sorted(glob.glob(os.path.join(OUT, recipe, "data", "*.parquet"))):
        seen = {}
        # `tools` read as a dictionary (a seq split's rows share a few 2-60 KB toolkits): each
        # distinct text hashed once, a row keyed by its toolkit's hash.
        table = pq.read_table(path, read_dictionary=["tools"])
        for batch in table.to_batches():
            tools = batch.column("tools")
            digests = [hashlib.blake2b(v.encode(), digest_size=16).hexdigest() for v in tools.dictionary.to_pylist()]
            rest = batch.drop_columns(["tools"]).to_pylist()
            for row, i in zip(rest, tools.indices.to_pylist()):
                row["tools"] = digests[i]
                k = row_key(row)
                if k in seen:
                    dups.setdefault(os.path.basename(path), []).append((row["id"], seen[k]))
                seen.setdefault(k, row["id"])
    for path in sorted(glob.glob(os.path.join(OUT, recipe, "trajectories", "*.jsonl"))):
        seen = {}
        with open(path) as f:
            for line in f:
                tid, at = DECODER.raw_decode(line, len('{"id":'))
                k = hashlib.blake2b(line[at:].encode(), digest_size=16).digest()
                if k in seen:
                    dups.setdefault(os.path.basename(path), []).append((tid, seen[k]))
                seen.setdefault(k, tid)
    print(f"{recipe}: exact duplicate rows/trajectories {sum(len(v) for v in dups.values())}")
    assert not dups, {k: v[:3] for k, v in dups.items()}
