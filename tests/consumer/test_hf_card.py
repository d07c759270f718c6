"""The dataset cards as Hugging Face reads them: `huggingface_hub.DatasetCard` parses and validates
the YAML metadata of every built dataset (license, license_name/license_link for `other`,
language, size_categories, splits with num_bytes/num_examples matching the Parquet files), and
`datasets.load_dataset(<dir>)` loads it without a warning or a logged message about the card;
executable datasets' `trajectories/` directory loads as its own dataset (`trajectories/README.md`:
configs `default` and `openai`), every trajectory file, clean and faulted splits together, with
one Arrow type per field (issue 29) and the values as the files hold them."""
import glob
import json
import logging
import os
import warnings

import pyarrow.parquet as pq
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "out")
DATASETS = sorted(d for d in os.listdir(OUT) if os.path.isfile(os.path.join(OUT, d, "README.md"))) if os.path.isdir(OUT) else []
SIZE_CATEGORIES = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")]


def test_there_are_built_datasets():
    assert DATASETS, "no built dataset under out/ (run the builds first)"


@pytest.mark.parametrize("dataset", DATASETS)
def test_card_metadata_parses_and_is_complete(dataset):
    from huggingface_hub import DatasetCard

    path = os.path.join(OUT, dataset, "README.md")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        card = DatasetCard.load(path)
    data = card.data.to_dict()
    assert data["language"] == ["en"]
    assert data["license"]
    if data["license"] == "other":
        assert data["license_name"] and data["license_link"].startswith("http"), data
    info = data["dataset_info"]
    total = 0
    for split in info["splits"]:
        n = pq.read_metadata(os.path.join(OUT, dataset, "data", split["name"] + ".parquet")).num_rows
        assert split["num_examples"] == n
        assert split["num_bytes"] > 0
        total += n
    assert info["dataset_size"] == sum(s["num_bytes"] for s in info["splits"])
    assert data["size_categories"] == [next(c for limit, c in SIZE_CATEGORIES if total < limit)]
    # Every row counted in the text, every column described, drop reasons tabulated.
    assert f"- rows: {total} " in card.text
    assert "## Columns" in card.text and "| `output` |" in card.text
    assert "## Dropped items by reason" in card.text


@pytest.mark.parametrize("dataset", DATASETS)
def test_load_dataset_without_warnings(dataset, caplog, tmp_path):
    import datasets

    datasets.disable_progress_bars()
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        loaded = datasets.load_dataset(os.path.join(OUT, dataset), cache_dir=str(tmp_path))
    messages = [str(w.message) for w in caught] + [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not messages, messages
    for split, ds in loaded.items():
        assert ds.num_rows == pq.read_metadata(os.path.join(OUT, dataset, "data", split + ".parquet")).num_rows


# Trajectory folders over LOAD_BYTES (the seq recipes but SGD and MultiWOZ, 0.4-4.6 GB, and
# sel-spider-variants, 1.2 GB: every line carries its toolkit) are not loaded whole here (minutes
# and GBs of Arrow cache each): they are streamed through their card's configs instead
# (test_large_trajectory_folders_stream_through_their_card_configs); every line's types are
# pinned by test_trajectory_arrow_schema.py, and tests/consumer/test_seq_trajectories.py reads
# every seq line. TOOLFORGE_LOAD_ALL=1 loads them whole too.
LOAD_BYTES = 300 << 20


def folder_bytes(d):
    return sum(os.path.getsize(p) for p in glob.glob(os.path.join(OUT, d, "trajectories", "**", "*.jsonl"), recursive=True))


# Only recipes whose `trajectories/` is a dataset of its own (its card declares the configs); a
# seq recipe's `trajectories/dialogue/` has its own card (tests/consumer/test_dialogue_trajectories.py).
WITH_CARD = [d for d in DATASETS if os.path.isfile(os.path.join(OUT, d, "trajectories", "README.md"))]
TRAJECTORY_DATASETS = [d for d in WITH_CARD if os.environ.get("TOOLFORGE_LOAD_ALL") == "1" or folder_bytes(d) <= LOAD_BYTES]
LARGE = sorted(set(WITH_CARD) - set(TRAJECTORY_DATASETS))


def config_names(dataset):
    """The card's config names of the exports: the one marked `default: true`, and the other."""
    import yaml

    with open(os.path.join(OUT, dataset, "trajectories", "README.md")) as f:
        configs = yaml.safe_load(f.read().split("---")[1])["configs"]
    return {"default": next(c["config_name"] for c in configs if c.get("default")),
            "openai": next(c["config_name"] for c in configs if not c.get("default"))}


@pytest.mark.parametrize("dataset", LARGE)
def test_large_trajectory_folders_stream_through_their_card_configs(dataset):
    """A folder too large to load whole here is read by `datasets` as a user would stream it:
    each config the card declares, each split, its first STREAM_ROWS rows cast to the card's
    features and equal to the file's lines."""
    import datasets
    from itertools import islice

    datasets.disable_progress_bars()
    print(f"{dataset}: {folder_bytes(dataset) >> 20} MB, streamed (over {LOAD_BYTES >> 20} MB)")
    names = config_names(dataset)
    for config, sub in [("default", ""), ("openai", "openai")]:
        loaded = datasets.load_dataset(os.path.join(OUT, dataset, "trajectories"), names[config], streaming=True)
        assert loaded, (dataset, config)
        for split, ds in loaded.items():
            stem = split[: -len("_faults")] + ".faults" if split.endswith("_faults") else split
            with open(os.path.join(OUT, dataset, "trajectories", sub, stem + ".jsonl")) as f:
                lines = [json.loads(line) for line in islice(f, STREAM_ROWS)]
            rows = list(islice(iter(ds), STREAM_ROWS))
            assert len(rows) == len(lines), (config, split)
            for row, line in zip(rows, lines):
                assert row["tools"] == line["tools"], (config, split)
                for got, want in zip(row["messages"], line["messages"]):
                    assert {k: v for k, v in got.items() if v is not None} == want, (config, split)


STREAM_ROWS = 50


def jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("dataset", TRAJECTORY_DATASETS)
def test_trajectory_configs_load_every_file_with_one_type_per_field(dataset, tmp_path):
    """`load_dataset(dir + "/trajectories")` (the default export: arguments and tools
    declared `json` in its card, gold_answer the SQL result's JSON text) and its `"openai"` config load every split, clean and
    faulted, and give back each line's values unchanged."""
    import datasets

    datasets.disable_progress_bars()
    names = config_names(dataset)
    # The default config is the one `load_dataset(dir)` picks without a name.
    assert set(datasets.load_dataset(os.path.join(OUT, dataset, "trajectories"), cache_dir=str(tmp_path))) == \
        set(datasets.load_dataset(os.path.join(OUT, dataset, "trajectories"), names["default"], cache_dir=str(tmp_path)))
    for config, sub in [("default", ""), ("openai", "openai")]:
        loaded = datasets.load_dataset(os.path.join(OUT, dataset, "trajectories"), names[config], cache_dir=str(tmp_path))
        features = {split: ds.features for split, ds in loaded.items()}
        assert len({repr(f) for f in features.values()}) == 1, features
        for split, ds in loaded.items():
            stem = split[: -len("_faults")] + ".faults" if split.endswith("_faults") else split
            lines = jsonl(os.path.join(OUT, dataset, "trajectories", sub, stem + ".jsonl"))
            assert ds.num_rows == len(lines), (config, split)
            for i in sorted({0, len(lines) // 2, len(lines) - 1} - {-1}):
                row = ds[i]
                assert row["tools"] == lines[i]["tools"]
                if lines[i].get("gold_answer") is not None:
                    # (the SQL result's JSON text, as in the Parquet rows; null without a back end)
                    assert isinstance(lines[i]["gold_answer"], str), (config, split, i)
                    assert row["gold_answer"] == lines[i]["gold_answer"], (config, split, i)
                for got, want in zip(row["messages"], lines[i]["messages"]):
                    assert {k: v for k, v in got.items() if v is not None} == want, (config, split, i)


@pytest.mark.parametrize("dataset", TRAJECTORY_DATASETS)
def test_openai_export_holds_only_openai_keys_and_a_sidecar_per_line(dataset):
    """`trajectories/openai/`: each line only `messages`, `tools`, `parallel_tool_calls`;
    arguments as JSON text; tool messages without `name`; function names within OpenAI's
    `^[a-zA-Z0-9_-]{1,64}$`; the sidecar names each line's `id`, `gold_answer` and `faults`."""
    import re

    ok = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
    tdir = os.path.join(OUT, dataset, "trajectories")
    violations = []
    for path in sorted(glob.glob(os.path.join(tdir, "openai", "*.jsonl"))):
        if path.endswith(".meta.jsonl"):
            continue
        lines = jsonl(path)
        side = jsonl(path[: -len(".jsonl")] + ".meta.jsonl")
        default = jsonl(os.path.join(tdir, os.path.basename(path)))
        assert [s["line"] for s in side] == list(range(len(lines)))
        assert [s["id"] for s in side] == [t["id"] for t in default]
        for t in lines:
            if list(t) != ["messages", "tools", "parallel_tool_calls"]:
                violations.append(("keys", list(t)))
            names = [f["function"]["name"] for f in t["tools"]]
            for m in t["messages"]:
                allowed = {"system": {"role", "content"}, "user": {"role", "content"},
                           "assistant": {"role", "content", "tool_calls"},
                           "tool": {"role", "tool_call_id", "content"}}[m["role"]]
                if set(m) - allowed:
                    violations.append(("message keys", sorted(m)))
                for c in m.get("tool_calls", []):
                    names.append(c["function"]["name"])
                    if not isinstance(c["function"]["arguments"], str):
                        violations.append(("arguments", c["function"]["arguments"]))
                    else:
                        json.loads(c["function"]["arguments"])
            violations += [("name", n) for n in names if not ok.match(n)]
    print(f"{dataset}: OpenAI-format violations {len(violations)}")
    assert not violations, violations[:5]
