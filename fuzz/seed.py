"""Seeds the fuzz corpora (fuzz/corpus/<target>/) from the real shared corpora: small slices of
every file format a target reads, with the target's first byte selecting the reader. Run by
`just fuzz`; the corpora directory is git-ignored and rebuilt each time."""
import json
import pathlib
import sys

here = pathlib.Path(__file__).resolve().parent
project = here.parent
corpora = project.parent / "shared" / "corpora"
out = here / "corpus"


def put(target, name, data):
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def head_lines(path, n):
    with open(path, "rb") as f:
        return b"".join(f.readline() for _ in range(n))


spider = json.loads((corpora / "spider/dev.json").read_text())
for i, q in enumerate(spider):
    put("sql_lowering", f"spider-{i:04}", q["query"])
bird = json.loads((corpora / "bird/dev_databases/mini_dev_sqlite.json").read_text())
for i, q in enumerate(bird[:200]):
    put("sql_lowering", f"bird-{i:04}", q["SQL"])

for p in sorted((project / "recipes").glob("*.toml")) + sorted((project / "sources").glob("*.toml")):
    put("recipe", p.parent.name + "-" + p.name, p.read_bytes())

put("sql_corpus", "spider", b"\x00" + json.dumps(spider[:3]).encode())
put("sql_corpus", "bird", b"\x01" + json.dumps(bird[:3]).encode())
tables = json.loads((corpora / "spider/tables.json").read_text())
put("sql_corpus", "tables", b"\x02" + json.dumps(tables[:2]).encode())
csvs = sorted(corpora.glob("bird/**/database_description/*.csv"))
if csvs:
    put("sql_corpus", "bird-csv", b"\x03" + head_lines(csvs[0], 12))

put("seq_corpus", "mixatis", b"\x00" + head_lines(corpora / "mixatis_clean/dev.txt", 60))
put("seq_corpus", "topv2", b"\x01" + head_lines(corpora / "topv2/alarm_eval.tsv", 20))
sgd = json.loads((corpora / "sgd/train/dialogues_001.json").read_text())
put("seq_corpus", "sgd", b"\x02" + json.dumps(sgd[:2]).encode())
woz = json.loads((corpora / "multiwoz/MultiWOZ_2.1/val.json").read_text())
put("seq_corpus", "multiwoz", b"\x03" + json.dumps(dict(list(woz.items())[:2])).encode())

mcp = json.loads((corpora / "mcp/livemcpbench_tools.json").read_text())
put("catalog_corpus", "mcp", b"\x00" + json.dumps(mcp[:3], ensure_ascii=False).encode())
put("catalog_corpus", "bfcl", b"\x01" + head_lines(corpora / "bfcl/BFCL_v4_simple_python.json", 5))
print(f"seeded {sum(1 for _ in out.rglob('*') if _.is_file())} inputs under {out}", file=sys.stderr)
