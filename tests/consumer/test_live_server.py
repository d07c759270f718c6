"""Independent check of the live tool server: start `toolforge serve` for each built REST dataset,
send every row's gold call as an HTTP GET on 127.0.0.1 (Python's urllib), and compare the response
with the row's SQL run by Python's sqlite3 on the real database. Also: FastAPI-shaped 422s and
injection strings as values; the database files are byte-identical afterwards."""
import hashlib
import json
import os
import subprocess
import urllib.error
import urllib.parse
import urllib.request

import pyarrow.parquet as pq
import pytest

from answers import same, sql_rows

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "target", "release", "toolforge")
DBS = {
    "rest-spider": os.path.join(ROOT, "..", "shared", "corpora", "spider", "database"),
    "rest-bird": os.path.join(ROOT, "..", "shared", "corpora", "bird", "dev_databases"),
}


def db_digest(root):
    h = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.endswith(".sqlite"):
                p = os.path.join(dirpath, f)
                h[p] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return h


class Server:
    def __init__(self, dataset):
        self.proc = subprocess.Popen(
            [BIN, "serve", dataset, "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        line = self.proc.stdout.readline()
        assert "http://" in line, line
        self.base = line.strip().split("listening on ")[1]

    def get(self, path, params):
        url = self.base + path + ("?" + urllib.parse.urlencode(params) if params else "")
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def stop(self):
        self.proc.terminate()  # SIGTERM: graceful shutdown
        assert self.proc.wait(timeout=10) == 0


@pytest.mark.parametrize("dataset", sorted(DBS))
def test_every_rest_row_through_the_live_server(dataset):
    before = db_digest(DBS[dataset])
    rows = pq.read_table(os.path.join(ROOT, "out", dataset, "data", "dev.parquet")).to_pylist()
    assert rows
    server = Server(dataset)
    failures = []
    try:
        for row in rows:
            call = row["output"][0]
            path = json.loads(row["meta"])["endpoint"]["path"]
            args = json.loads(call["arguments"])
            status, body = server.get(path, {k: v if isinstance(v, str) else json.dumps(v) for k, v in args.items()})
            expected = sql_rows(os.path.join(DBS[dataset], row["db_id"], row["db_id"] + ".sqlite"), row["sql"])
            if status != 200 or not same(expected, body, row["ordered"]):
                failures.append((row["id"], status))
    finally:
        server.stop()
    assert not failures, f"{len(failures)} rows differ: {failures[:10]}"
    assert db_digest(DBS[dataset]) == before


def test_errors_are_fastapi_shaped_and_injection_is_data():
    endpoints = json.load(open(os.path.join(ROOT, "out", "rest-spider", "tools", "endpoints.json")))
    with_string = next(e for e in endpoints if [p["kind"] for p in e["parameters"]] == ["string"])
    name = with_string["parameters"][0]["name"]
    db = os.path.join(DBS["rest-spider"], with_string["db_id"], with_string["db_id"] + ".sqlite")
    server = Server("rest-spider")
    try:
        status, body = server.get(with_string["path"], {})
        assert status == 422
        assert body == {"detail": [{"type": "missing", "loc": ["query", name], "msg": "Field required", "input": None}]}
        for evil in ["' OR 1=1 --", "x'); DROP TABLE singer; --", "\" OR \"\"=\""]:
            status, body = server.get(with_string["path"], {name: evil})
            assert status == 200, body
            import sqlite3

            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            # The endpoint's own SQL with the value bound: what a safe server must return.
            expected = [list(r) for r in conn.execute(with_string["sql"], [evil]).fetchall()]
            conn.close()
            assert same(expected, body, with_string["ordered"])
        assert server.get("/no/such/path", {}) == (404, {"detail": "Not Found"})
    finally:
        server.stop()
