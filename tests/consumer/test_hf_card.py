"""The dataset cards as Hugging Face reads them: `huggingface_hub.DatasetCard` parses and validates
the YAML metadata of every built dataset (license, license_name/license_link for `other`,
language, size_categories, splits with num_bytes/num_examples matching the Parquet files), and
`datasets.load_dataset(<dir>)` loads it without a warning or a logged message about the card."""
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
