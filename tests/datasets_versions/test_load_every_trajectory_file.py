"""Every trajectory file of every built recipe (`out/*/trajectories`) loaded by the `datasets`
version of the interpreter running this file, clean and faulted splits together (issue 29, item 7).
`just test-datasets-versions` (tests/datasets_versions/run.sh) runs it in a venv per version:
3.6.0, the newest 4.x and the newest 5.x.

- Through the card (`load_dataset("<dir>/trajectories", config)`, configs `default` and `openai`,
  whose features declare `arguments` and `tools` as `json`; `gold_answer` is JSON text): with a `datasets` that
  has the `Json` feature (4.x's newest, 5.x), every split with one set of features and each line's
  values as the file holds them.
- As plain JSON (`load_dataset("json", data_files=[every file of the export])`, one split holding
  clean and faulted lines, so any field whose type changes from line to line or file to file
  fails): the OpenAI export and its sidecars with every version; the default export with every
  version that has `Json`.

What `datasets` 3.x cannot read, and why, is listed below as strict expected failures (never
skipped: a version that starts reading them fails the test until the entry is removed). Both are
properties of 3.x, not of the files: it has no `Json` feature, so an object whose keys and value
types change from call to call (a call's `arguments`, the Hugging Face convention) has no Arrow
type there (`NO_JSON_TYPE`); and it casts every 10 MB chunk to the first chunk's types, so a
`tools` struct whose `properties` are keyed by parameter names that later chunks extend (variant
rows rename and obfuscate parameters) fails (`FIRST_CHUNK_STRUCT`). With 3.x, the card's
documented route is the OpenAI files (arguments as text) or `toolforge trajectories --format
sharegpt`. `tests/consumer/test_trajectory_arrow_schema.py` pins the Arrow schema in `just test`.
"""
import glob
import json
import os

import datasets
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "out")

HAS_JSON = hasattr(datasets, "Json")
# (a recipe whose trajectories folder has its card: seq-sgd/seq-multiwoz `trajectories/dialogue/` alone is not)
RECIPES = sorted(d for d in os.listdir(OUT) if os.path.isfile(os.path.join(OUT, d, "trajectories", "README.md"))) if os.path.isdir(OUT) else []
# TOOLFORGE_TRAJECTORY_RECIPES (space-separated) restricts the run to those built recipes.
if os.environ.get("TOOLFORGE_TRAJECTORY_RECIPES"):
    RECIPES = [r for r in RECIPES if r in os.environ["TOOLFORGE_TRAJECTORY_RECIPES"].split()]
NO_JSON_TYPE = "datasets < 4.x has no `Json` feature: call arguments are objects whose value types change from call to call"
CARD_JSON = "datasets < 4.x has no `Json` feature, the type the card declares for `tools` (and the default export's `arguments`)"
FIRST_CHUNK_STRUCT = (
    "datasets 3.x casts each chunk to the first chunk's struct: `tools[].function.parameters.properties` "
    "is keyed by parameter names, which variant rows rename and obfuscate, so a later chunk has fields the first lacks"
)


def jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def files(recipe, export):
    """The files of `export` (`default`, `openai` or `sidecar`) of `recipe`, clean and faulted."""
    tdir = os.path.join(OUT, recipe, "trajectories")
    if export == "default":
        return sorted(glob.glob(os.path.join(tdir, "*.jsonl")))
    every = sorted(glob.glob(os.path.join(tdir, "openai", "*.jsonl")))
    return [p for p in every if p.endswith(".meta.jsonl") == (export == "sidecar")]


def without_nulls(v):
    """`v` without its `None`s, recursively: what plain JSON inference gives back of a line, whose
    objects become structs of every key seen (absent ones None)."""
    if isinstance(v, dict):
        return {k: without_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [without_nulls(x) for x in v]
    return v


def load_or_expected_failure(reason, load):
    """`load()`, or — when `reason` names why this version cannot — a strict expected failure:
    the load is run, its error reported as the xfail, and a load that succeeds fails the test
    (the entry is stale)."""
    if reason is None:
        return load()
    try:
        load()
    except Exception as e:  # noqa: BLE001 — the version's own error, reported
        pytest.xfail(f"datasets {datasets.__version__}: {reason} ({type(e).__name__})")
    pytest.fail(f"datasets {datasets.__version__} now loads what {reason!r} said it cannot: remove the entry")


def config_names(recipe):
    """The card's config names of the exports: the one marked `default: true`, and the other
    (named after the recipe and its files' digest, issue 45)."""
    import yaml

    with open(os.path.join(OUT, recipe, "trajectories", "README.md")) as f:
        configs = yaml.safe_load(f.read().split("---")[1])["configs"]
    return {"default": next(c["config_name"] for c in configs if c.get("default")),
            "openai": next(c["config_name"] for c in configs if not c.get("default"))}


def test_there_are_trajectory_files():
    assert RECIPES, "no built recipe with trajectories under out/ (build them first)"


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("config", ["default", "openai"])
def test_card_configs_load_with_one_type_per_field(recipe, config, tmp_path):
    datasets.disable_progress_bars()
    loaded = load_or_expected_failure(
        None if HAS_JSON else CARD_JSON,
        lambda: datasets.load_dataset(os.path.join(OUT, recipe, "trajectories"), config_names(recipe)[config], cache_dir=str(tmp_path)),
    )
    assert len({repr(ds.features) for ds in loaded.values()}) == 1
    sub = "openai" if config == "openai" else ""
    for split, ds in loaded.items():
        stem = split[: -len("_faults")] + ".faults" if split.endswith("_faults") else split
        lines = jsonl(os.path.join(OUT, recipe, "trajectories", sub, stem + ".jsonl"))
        assert ds.num_rows == len(lines)
        for i in range(len(lines)):
            row, line = ds[i], lines[i]
            assert row["tools"] == line["tools"], (split, i)
            # (a message's absent keys come back None: a struct field; a call's `arguments` is
            # `json`, so an argument that is null in the file stays null)
            got = [{k: v for k, v in m.items() if v is not None} for m in row["messages"]]
            assert got == line["messages"], (split, i)
            if "gold_answer" in line:
                assert row["gold_answer"] == line["gold_answer"], (split, i)


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("export", ["default", "openai", "sidecar"])
def test_plain_json_loader_reads_clean_and_faulted_files_together(recipe, export, tmp_path):
    paths = files(recipe, export)
    assert paths, (recipe, export)
    reason = None
    if export == "default" and not HAS_JSON:
        reason = NO_JSON_TYPE
    if export == "openai" and not HAS_JSON and recipe.endswith("-variants"):
        reason = FIRST_CHUNK_STRUCT
    datasets.disable_progress_bars()
    ds = load_or_expected_failure(
        reason, lambda: datasets.load_dataset("json", data_files={"train": paths}, cache_dir=str(tmp_path))["train"]
    )
    lines = [line for p in paths for line in jsonl(p)]
    assert ds.num_rows == len(lines)
    for i in sorted({0, len(lines) // 2, len(lines) - 1}):
        row, line = without_nulls(ds[i]), lines[i]
        assert set(row) == set(line), (export, i)
        for k in line:
            if k in ("messages", "tools"):
                assert row[k] == without_nulls(line[k]), (export, i, k)
