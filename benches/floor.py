"""The SQLite floor of a text-to-SQL build (issue 17): Python's sqlite3 executing each gold query
once, one thread, every row fetched. Usage: floor.py QUESTIONS.json DATABASE_ROOT.
Prints `<wall seconds> <cpu seconds> <queries run>`; a query that fails is counted, not fatal."""
import json
import os
import sqlite3
import sys
import time

questions, root = sys.argv[1], sys.argv[2]
qs = json.load(open(questions))
start, cpu = time.perf_counter(), time.process_time()
conns = {}
run = 0
for q in qs:
    db = q["db_id"]
    path = f"{root}/{db}/{db}.sqlite"
    if db not in conns:
        # A database that is not present (BIRD here: 1 of 11) is skipped, as the build drops it.
        conns[db] = sqlite3.connect(f"file:{path}?mode=ro", uri=True) if os.path.exists(path) else None
    if conns[db] is None:
        continue
    run += 1
    try:
        conns[db].execute(q.get("query") or q.get("SQL")).fetchall()
    except sqlite3.Error:
        pass
print(f"{time.perf_counter() - start:.3f} {time.process_time() - cpu:.3f} {run}")
