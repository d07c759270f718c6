"""Answer comparison under the DESIGN.md rule (multiset unless ordered; 1 == 1.0; reals within
1e-9 relative; NULL == NaN), written independently of the Rust code, plus a read-only SQLite
runner."""
import math
import sqlite3
from collections import Counter


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


def sql_rows(db_path, sql):
    """The rows of `sql` on a read-only connection to `db_path`, as lists."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    conn.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        return [list(r) for r in conn.execute(sql).fetchall()]
    finally:
        conn.close()
