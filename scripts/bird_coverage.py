#!/usr/bin/env python3
"""BIRD mini-dev construct coverage: how many of the 500 gold queries the lowering handles.

Only the superhero database ships in ../shared/corpora; the other ten are rebuilt here *empty*
from `mini_dev_sqlite_tables.json` (tables, columns and declared types, no rows), and the build
keeps empty and degenerate gold answers, so what decides a row is the lowering alone (issue 27's
method). Every question is attempted: a row is either kept or dropped with a named reason.

Usage: python3 scripts/bird_coverage.py [--toolforge target/release/toolforge]
       [--format slot|sel|rest] [--corpus DIR] [--json FILE] [--min-percent P]

Prints `coverage <format>: K / N (P%)` and the drops by reason; exits 1 when P < --min-percent.
The temporary tree (databases, recipe, store, output) is removed at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpora" / "bird" / "dev_databases"


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def build_schema_only(schema: dict, path: Path) -> None:
    """Creates `path` with the tables and typed columns of one tables.json entry, no rows."""
    tables = schema["table_names_original"]
    columns: dict[int, list[str]] = {i: [] for i in range(len(tables))}
    for (t, name), ty in zip(schema["column_names_original"], schema["column_types"]):
        if t < 0:
            continue
        sql_type = {"integer": "INTEGER", "real": "REAL", "number": "NUMERIC", "text": "TEXT",
                    "date": "DATE", "datetime": "DATETIME", "time": "TEXT", "blob": "BLOB"}.get(ty.lower(), "TEXT")
        columns[t].append(f"{quote(name)} {sql_type}")
    con = sqlite3.connect(path)
    for i, table in enumerate(tables):
        con.execute(f"CREATE TABLE {quote(table)} ({', '.join(columns[i]) or 'x'})")
    con.commit()
    con.close()


def prepare(corpus: Path, tmp: Path, fmt: str) -> Path:
    """The corpus tree (real databases linked, absent ones rebuilt empty) and a recipe; returns the recipe."""
    data = tmp / "bird"
    data.mkdir()
    shutil.copy(corpus / "mini_dev_sqlite.json", data / "mini_dev_sqlite.json")
    for schema in json.loads((corpus / "mini_dev_sqlite_tables.json").read_text()):
        db = schema["db_id"]
        (data / db).mkdir()
        real = corpus / db / f"{db}.sqlite"
        if real.is_file():
            os.symlink(real, data / db / f"{db}.sqlite")
        else:
            build_schema_only(schema, data / db / f"{db}.sqlite")
        if (corpus / db / "database_description").is_dir():
            os.symlink(corpus / db / "database_description", data / db / "database_description")
    (tmp / "recipes").mkdir()
    (tmp / "sources").mkdir()
    shutil.copy(ROOT / "sources" / "bird-dev.toml", tmp / "sources" / "bird-dev.toml")
    recipe = tmp / "recipes" / f"bird-coverage-{fmt}.toml"
    recipe.write_text(
        f'name = "bird-coverage-{fmt}"\n'
        f'description = "BIRD mini-dev construct coverage (schema-only databases)."\n'
        f'format = "{fmt}"\nsource = "bird-dev"\nsplit = "dev"\n'
        "keep_empty_answers = true\nkeep_degenerate_answers = true\n"
    )
    os.environ["TOOLFORGE_BIRD_DEV"] = str(data)
    return recipe


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--toolforge", default=str(ROOT / "target" / "release" / "toolforge"))
    ap.add_argument("--format", default="slot", choices=["slot", "sel", "rest"])
    ap.add_argument("--corpus", default=str(DEFAULT_CORPUS), help="BIRD mini-dev directory")
    ap.add_argument("--json", help="write {kept, attempted, dropped_by_reason, dropped_list} here")
    ap.add_argument("--min-percent", type=float, default=0.0)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bird-coverage-"))
    try:
        recipe = prepare(Path(args.corpus), tmp, args.format)
        cmd = [args.toolforge, "build", str(recipe), "--out", str(tmp / "out"), "--store", str(tmp / "store"), "--quiet"]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stdout, run.stderr, sep="\n", file=sys.stderr)
            print(f"bird_coverage: build failed (exit {run.returncode})", file=sys.stderr)
            return 2
        report = json.loads((tmp / "out" / recipe.stem / "report" / "verification.json").read_text())
        kept, attempted = report["kept"], report["attempted"]
        pct = 100.0 * kept / max(attempted, 1)
        print(f"coverage {args.format}: {kept} / {attempted} ({pct:.1f}%)")
        reasons = Counter(report["dropped_by_reason"])
        for reason, n in reasons.most_common():
            print(f"  {n:4}  {reason}")
        if args.json:
            Path(args.json).write_text(json.dumps({k: report[k] for k in ("kept", "attempted", "dropped_by_reason", "dropped_list")}, indent=1))
        return 1 if pct < args.min_percent else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
