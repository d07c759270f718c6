"""Every trajectory file of every built recipe, dialogue folder and training mix under out/,
loaded by the `datasets` version of the interpreter running this file, clean and faulted splits
together (issue 29, item 7; issue 45: seq calls-only trajectories, SGD/MultiWOZ dialogues, mixes).
`just test-datasets-versions` (tests/datasets_versions/run.sh) runs it in a venv per version:
3.6.0, the newest 4.x and the newest 5.x.

A trajectory folder is one with a card (`README.md`) whose configs name JSON Lines files:
`out/<recipe>/trajectories/`, `out/<recipe>/trajectories/dialogue/` (SGD, MultiWOZ) and a mix's
`out/<mix>/` (files under `trajectories/`). Every config of its card is checked:

- Through the card (`load_dataset(<folder>, <config>)`), with the features it declares: every
  split with one set of features and each line's values as the file holds them (a message's
  absent keys come back None: Arrow structs; `tools` exactly, not padded).
- As plain JSON (`load_dataset("json", data_files=[every file of the config])`, one split, so a
  field whose type changes from line to line or file to file fails).
- `toolforge trajectories <folder> --format openai-text` (each tool's `parameters` as JSON text)
  loaded as plain JSON, every row's `tools` exactly as converted (no padding) and its parameters
  parsing back to the schema the trajectory holds: the route for `datasets` 3.x.

What a version cannot read, and why, is listed below as strict expected failures (never skipped:
a version that starts reading them fails the test until the entry is removed). They are properties
of `datasets`, not of the files: 3.x has no `Json` feature, so an object whose keys and value
types change from call to call (a call's `arguments`, the Hugging Face convention) has no Arrow
type there (`NO_JSON_TYPE`, `CARD_JSON`); and its plain JSON inference makes each tool's
`parameters` a struct of every parameter name of every tool in the file — each tool comes back
padded with the others' parameters as null, and a later 10 MB chunk naming a parameter the first
chunk lacks cannot be cast at all (`STRUCT_TOOLS`; the newest 4.x and 5.x give every tool back
exactly). `tests/consumer/test_trajectory_arrow_schema.py`
pins the Arrow schema in `just test`.
"""
import glob
import json
import os
import random
import subprocess

import datasets
import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "out")
TOOLFORGE = os.path.join(ROOT, "target", "release", "toolforge")
HAS_JSON = hasattr(datasets, "Json")
NO_JSON_TYPE = "datasets < 4.x has no `Json` feature: call arguments are objects whose value types change from call to call"
CARD_JSON = "datasets < 4.x has no `Json` feature, the type the card declares for `tools` (and the default export's `arguments`)"
STRUCT_TOOLS = (
    "plain JSON inference types `tools[].function.parameters` as one struct of every tool's parameter names: "
    "each tool padded with the others' as null, or a cast error when a later chunk names a parameter the first lacks "
    "(read the card's config, whose `tools` is `json`, or `toolforge trajectories --format openai-text`)"
)
# How many rows per file the value checks compare (every row is loaded; a failing cast fails the load).
CHECKED = int(os.environ.get("TOOLFORGE_DATASETS_CHECKED", "200"))


def card(folder):
    """The card's YAML header at `folder`, or None."""
    path = os.path.join(folder, "README.md")
    if not os.path.isfile(path):
        return None
    text = open(path).read()
    if not text.startswith("---"):
        return None
    return yaml.safe_load(text.split("---")[1])


def is_trajectory_folder(folder):
    meta = card(folder)
    paths = [f["path"] for c in (meta or {}).get("configs", []) for f in c.get("data_files", [])]
    return bool(paths) and all(p.endswith(".jsonl") and not p.startswith("data/") for p in paths)


def folders():
    if not os.path.isdir(OUT):
        return []
    found = []
    for d in sorted(os.listdir(OUT)):
        for rel in (f"{d}/trajectories", f"{d}/trajectories/dialogue", d):
            if is_trajectory_folder(os.path.join(OUT, rel)):
                found.append(rel)
    # TOOLFORGE_TRAJECTORY_RECIPES (space-separated) restricts the run to those recipes' folders.
    if os.environ.get("TOOLFORGE_TRAJECTORY_RECIPES"):
        keep = os.environ["TOOLFORGE_TRAJECTORY_RECIPES"].split()
        found = [f for f in found if f.split("/")[0] in keep]
    return found


FOLDERS = folders()


def configs(rel):
    """`(folder, config, kind)` of every config of the card at `out/<rel>`: kind `default`
    (the HF/TRL export), `openai`, `gold` (turn-level gold sidecar) or `sharegpt`."""
    out = []
    for c in card(os.path.join(OUT, rel))["configs"]:
        name = c["config_name"]
        kind = "default" if c.get("default") or name == "default" else next(
            (k for k in ("openai", "gold", "sharegpt") if f"-{k}-" in name or name == k or name.endswith(f"-{k}")), "other")
        out.append((rel, name, kind))
    return out


CONFIGS = [c for rel in FOLDERS for c in configs(rel)]


def declares_json(rel, config):
    """Whether the card's features use `datasets`' `json` type anywhere: 3.x parses every
    config's features when loading any one (a dialogue card's gold config, with no `json` of its
    own, fails there too), so `config` does not narrow it."""
    text = yaml.safe_dump(card(os.path.join(OUT, rel)).get("dataset_info") or [])
    return "dtype: json" in text or "list: json" in text


def data_files(rel, config):
    """split → file path of `config`."""
    c = next(c for c in card(os.path.join(OUT, rel))["configs"] if c["config_name"] == config)
    return {f["split"]: os.path.join(OUT, rel, f["path"]) for f in c["data_files"]}


def jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def checked(n):
    """The row indices the value checks compare: all, or `CHECKED` of them (seeded)."""
    if n <= CHECKED:
        return range(n)
    return sorted(random.Random(0).sample(range(n), CHECKED))


def without_nulls(v):
    """`v` without its `None`s, recursively: what plain JSON inference gives back of a line, whose
    objects become structs of every key seen (absent ones None)."""
    if isinstance(v, dict):
        return {k: without_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [without_nulls(x) for x in v]
    return v


def messages_as_written(messages):
    """Messages with the keys Arrow added (None) removed; a message's own values untouched."""
    return [{k: v for k, v in m.items() if v is not None} for m in messages]


def load_or_expected_failure(reason, load):
    """`load()`, or — when `reason` names why this version cannot — a strict expected failure:
    the load is run, its error reported as the xfail, and a load that succeeds fails the test
    (the entry is stale)."""
    if reason is None:
        return load()
    try:
        load()
    except Exception as e:  # noqa: BLE001 — the version's own error, reported
        pytest.xfail(f"datasets {datasets.__version__}: {reason} ({type(e).__name__}: {str(e)[:160]})")
    pytest.fail(f"datasets {datasets.__version__} now loads what {reason!r} said it cannot: remove the entry")


def assert_rows_as_written(ds, lines, exact_tools):
    assert ds.num_rows == len(lines)
    for i in checked(len(lines)):
        row, line = ds[i], lines[i]
        assert set(k for k, v in row.items() if v is not None) <= set(line), i
        for k, v in line.items():
            if k == "messages":
                assert messages_as_written(row[k]) == v, (i, k)
            elif k == "tools" and exact_tools:
                assert row[k] == v, (i, k, "tools padded or changed")
            else:
                assert without_nulls(row[k]) == without_nulls(v), (i, k)


def test_there_are_trajectory_files():
    assert FOLDERS, "no built trajectories under out/ (build recipes first)"


@pytest.mark.parametrize("rel,config,kind", CONFIGS, ids=[f"{r}:{k}" for r, _, k in CONFIGS])
def test_card_configs_load_with_one_type_per_field(rel, config, kind, tmp_path):
    datasets.disable_progress_bars()
    reason = None
    if not HAS_JSON and declares_json(rel, config):
        reason = CARD_JSON

    def load():
        loaded = datasets.load_dataset(os.path.join(OUT, rel), config, cache_dir=str(tmp_path))
        assert len({repr(ds.features) for ds in loaded.values()}) == 1
        for split, path in data_files(rel, config).items():
            assert_rows_as_written(loaded[split], jsonl(path), exact_tools=True)
        return loaded

    load_or_expected_failure(reason, load)


@pytest.mark.parametrize("rel,config,kind", CONFIGS, ids=[f"{r}:{k}" for r, _, k in CONFIGS])
def test_plain_json_loader_reads_clean_and_faulted_files_together(rel, config, kind, tmp_path):
    paths = list(data_files(rel, config).values())
    reason = None
    has_tools = "tools" in jsonl_first(paths[0])
    if kind == "default" and not HAS_JSON:
        reason = NO_JSON_TYPE
    elif has_tools and kind == "openai" and not HAS_JSON:
        reason = STRUCT_TOOLS
    datasets.disable_progress_bars()

    def load():
        ds = datasets.load_dataset("json", data_files={"train": paths}, cache_dir=str(tmp_path))["train"]
        assert_rows_as_written(ds, [line for p in paths for line in jsonl(p)], exact_tools=True)
        return ds

    load_or_expected_failure(reason, load)


def jsonl_first(path):
    with open(path) as f:
        return json.loads(f.readline())


@pytest.mark.parametrize("rel", FOLDERS)
def test_openai_text_export_loads_exactly_in_every_version(rel, tmp_path):
    """`toolforge trajectories <folder> --format openai-text` (each tool's `parameters` as JSON
    text), loaded as plain JSON, clean and faulted together: every tool exactly as converted (no
    padding), its parameters parsing back to the trajectory's schema, messages as written."""
    out = tmp_path / "openai-text.jsonl"
    subprocess.run([TOOLFORGE, "trajectories", os.path.join(OUT, rel), "--format", "openai-text", "-o", str(out)], check=True)
    paths = [str(out)] + ([str(tmp_path / "openai-text.faults.jsonl")] if os.path.getsize(tmp_path / "openai-text.faults.jsonl") else [])
    lines = [line for p in paths for line in jsonl(p)]
    datasets.disable_progress_bars()
    ds = datasets.load_dataset("json", data_files={"train": paths}, cache_dir=str(tmp_path / "cache"))["train"]
    assert_rows_as_written(ds, lines, exact_tools=True)
    sources = sorted(glob.glob(os.path.join(OUT, rel, "*.jsonl")) + glob.glob(os.path.join(OUT, rel, "trajectories", "*.jsonl")))
    sources = [p for p in sources if not p.endswith(".gold.jsonl")]
    clean = [line for p in sources if not p.endswith(".faults.jsonl") for line in jsonl(p)]
    for i in checked(len(clean)):
        got = [dict(t["function"], parameters=json.loads(t["function"]["parameters"])) for t in ds[i]["tools"]]
        assert got == [t["function"] for t in clean[i]["tools"]], (rel, i)
    print(f"{rel}: openai-text {ds.num_rows} rows, features {ds.features['tools']}")
