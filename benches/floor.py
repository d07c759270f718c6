"""The SQLite floor of a text-to-SQL build (issue 17): Python's sqlite3 executing each gold query
once, one thread, every row fetched. Usage: floor.py QUESTIONS.json DATABASE_ROOT.
Prints `<wall seconds> <cpu seconds> <queries>`; a query that fails is counted, not fatal."""
import json
import sqlite3
import sys
import time

questions, root = sys.argv[1], sys.argv[2]
qs = json.load(open(questions))
start, cpu = time.perf_counter(), time.process_time()
conns = {}
for q in qs:
    db = q["db_id"]
    if db not in conns:
        conns[db] = sqlite3.connect(f"file:{root}/{db}/{db}.sqlite?mode=ro", uri=True)
    try:
        conns[db].execute(q.get("query") or q.get("SQL")).fetchall()
    except sqlite3.Error:
        pass
print(f"{time.perf_counter() - start:.3f} {time.process_time() - cpu:.3f} {len(qs)}")
