"""Independent consumer check: read every built row with pyarrow, re-run its `sql` with Python's
sqlite3 and compare with `gold_answer` under the DESIGN.md rule (multiset unless ordered; 1 == 1.0;
reals within 1e-9 relative; NULL == NaN). Also checks the call sequences' shape."""
import json
import math
import os
import sqlite3
from collections import Counter

import pyarrow.parquet as pq
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DBS = {
    "slot-spider": os.path.join(ROOT, "..", "shared", "corpora", "spider", "database"),
    "slot-bird": os.path.join(ROOT, "..", "shared", "corpora", "bird", "dev_databases"),
}


def norm(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ("null",)
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, (int, float)):
        return ("num", round(float(v), 9 - int(math.floor(math.log10(abs(v)))) if v else 0))
    if isinstance(v, bytes):
        return ("text", v.hex())
    return ("text", v)


def cell_eq(a, b):
    if a[0] == "num" and b[0] == "num":
        x, y = a[1], b[1]
        return x == y or abs(x - y) <= 1e-9 * max(abs(x), abs(y))
    return a == b


def same(gold, got, ordered):
    if len(gold) != len(got):
        return False
    g = [tuple(norm(c) for c in r) for r in gold]
    s = [tuple(norm(c) for c in r) for r in got]
    if ordered:
        return all(len(a) == len(b) and all(cell_eq(x, y) for x, y in zip(a, b)) for a, b in zip(g, s))
    if Counter(g) == Counter(s):
        return True
    key = lambda r: [(c[0], c[1] if len(c) > 1 else 0) for c in r]
    return all(all(cell_eq(x, y) for x, y in zip(a, b)) for a, b in zip(sorted(g, key=key), sorted(s, key=key)))


@pytest.mark.parametrize("dataset", ["slot-spider", "slot-bird"])
def test_every_row_reproduces_its_sql(dataset):
    path = os.path.join(ROOT, "out", dataset, "data", "dev.parquet")
    table = pq.read_table(path)
    rows = table.to_pylist()
    assert rows, "no rows"
    failures = []
    for row in rows:
        db = os.path.join(DBS[dataset], row["db_id"], row["db_id"] + ".sqlite")
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        conn.text_factory = lambda b: b.decode("utf-8", "replace")
        result = [list(r) for r in conn.execute(row["sql"]).fetchall()]
        conn.close()
        gold = json.loads(row["gold_answer"])
        if not same(result, gold, row["ordered"]):
            failures.append(row["id"])
        calls = row["output"]
        assert calls[0]["name"] == "initialize_active_data" and calls[0]["label"] == "starting_table_var"
        labels = [c["label"] for c in calls]
        assert len(labels) == len(set(labels)), row["id"]
        for c in calls:
            json.loads(c["arguments"])
        tools = json.loads(row["tools"])
        assert {t["name"] for t in tools} >= {"filter_data", "retrieve_data", "aggregate_data"}
    assert not failures, f"{len(failures)} false verifications: {failures[:10]}"


def test_datasets_are_nonempty_and_counted():
    for dataset in DBS:
        report = json.load(open(os.path.join(ROOT, "out", dataset, "report", "verification.json")))
        n = pq.read_metadata(os.path.join(ROOT, "out", dataset, "data", "dev.parquet")).num_rows
        assert n == report["verified"]
