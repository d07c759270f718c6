"""The dialogue trajectories of seq-sgd and seq-multiwoz (issue 45, item 2) rebuilt from the corpus
files by this test's own reader — plain `json` over ../shared/corpora, none of the project's code
— and compared turn by turn: the same utterances, calls and results in the same order.

- SGD: every turn's utterance; at a system turn, per frame with a `service_call`, the call
  `<Service>_<Intent>` with the call's `parameters` and, as its result, the frame's
  `service_results`; then the system utterance.
- MultiWOZ: every `log` text; at a system turn, per domain (restaurant, hotel, attraction, train,
  taxi, hospital, bus, police) with a `find_` tool whose belief-state `semi` constraints are set
  (not `dontcare`) and differ from the domain's previous search, a `find_<domain>` call whose
  arguments are those constraints (2.2 names; a value equal to the state's, or its database
  spelling), and whose result this test computes itself from `db/<domain>_db.json`: the total
  and the first 10 matching rows (trains constrained by `arriveby` alone: latest first); then per
  new `booked` entry a `book_<domain>` call whose result is that entry; then the system text.

20 dialogues of each corpus (evenly spaced over the kept ones of every split) are compared whole;
every kept dialogue's utterances are compared too (cheap), and the kept and dropped counts of the
report must add up to the corpus's dialogues."""
import glob
import json
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "out")
CORPORA = os.path.join(ROOT, "..", "shared", "corpora")
SAMPLE = 20
UNSET = {"", "not mentioned", "none"}
DOMAINS = ["restaurant", "hotel", "attraction", "train", "taxi", "hospital", "bus", "police"]
SEMI = {"pricerange": "pricerange", "area": "area", "food": "food", "name": "name", "type": "type",
        "parking": "parking", "stars": "stars", "internet": "internet", "department": "department",
        "leaveAt": "leaveat", "arriveBy": "arriveby", "destination": "destination",
        "departure": "departure", "day": "day"}
BOOK = {"people": "bookpeople", "day": "bookday", "stay": "bookstay", "time": "booktime"}


def trajectories(recipe):
    """(split, line) of every dialogue trajectory of `recipe`, with the gold sidecar's line."""
    d = os.path.join(OUT, recipe, "trajectories", "dialogue")
    out = []
    for path in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
        if path.endswith(".gold.jsonl"):
            continue
        split = os.path.basename(path)[: -len(".jsonl")]
        with open(path) as f, open(os.path.join(d, f"{split}.gold.jsonl")) as g:
            for line, gold in zip(f, g):
                out.append((split, json.loads(line), json.loads(gold)))
    return out


def sample(rows):
    step = max(1, len(rows) // SAMPLE)
    return rows[::step][:SAMPLE]


def steps(t):
    """The trajectory as steps: ("user", text), ("call", name, arguments), ("result", value),
    ("reply", text); tool-call ids checked to pair calls and results."""
    out, pending = [], None
    for m in t["messages"][1:]:
        if m["role"] == "user":
            out.append(("user", m["content"]))
        elif m["role"] == "assistant" and m.get("tool_calls"):
            assert m["content"] == "" and len(m["tool_calls"]) == 1, m
            c = m["tool_calls"][0]
            assert re.fullmatch(r"[A-Za-z0-9]{9}", c["id"]), c
            pending = c["id"]
            out.append(("call", c["function"]["name"], c["function"]["arguments"]))
        elif m["role"] == "tool":
            assert m["tool_call_id"] == pending, m
            out.append(("result", json.loads(m["content"])))
        else:
            assert m["role"] == "assistant", m
            out.append(("reply", m["content"]))
    return out


def utterances(st):
    return [s for s in st if s[0] in ("user", "reply")]


def report(recipe):
    with open(os.path.join(OUT, recipe, "report", "verification.json")) as f:
        return json.load(f)["stats"]["dialogue_trajectories"]


# ---------------------------------------------------------------- SGD

def sgd_dialogues():
    out = {}
    for split in ("train", "dev", "test"):
        for path in sorted(glob.glob(os.path.join(CORPORA, "sgd", split, "dialogues_*.json"))):
            with open(path) as f:
                for d in json.load(f):
                    out[f"seq-sgd/{split}/{d['dialogue_id']}"] = d
    return out


def sgd_steps(d):
    out = []
    for turn in d["turns"]:
        if turn["speaker"] == "USER":
            out.append(("user", turn["utterance"]))
            continue
        for frame in turn["frames"]:
            if "service_call" in frame:
                sc = frame["service_call"]
                name = re.sub(r"[^A-Za-z0-9_]", "_", f"{frame['service']}_{sc['method']}")
                out.append(("call", name, sc["parameters"]))
                out.append(("result", frame["service_results"]))
        out.append(("reply", turn["utterance"]))
    return out


@pytest.fixture(scope="module")
def sgd():
    rows = trajectories("seq-sgd")
    assert rows, "build seq-sgd first"
    return rows, sgd_dialogues()


def test_sgd_dialogues_rebuilt_from_the_corpus_turn_by_turn(sgd):
    rows, corpus = sgd
    for split, t, gold in sample(rows):
        assert steps(t) == sgd_steps(corpus[t["id"]]), t["id"]
        # The gold sidecar names each system turn's calls where the trajectory makes them.
        calls = [(c["name"], json.loads(c["arguments"])) for turn in gold["turns"] for c in turn["calls"]]
        assert calls == [(s[1], s[2]) for s in steps(t) if s[0] == "call"], t["id"]
        for turn in gold["turns"]:
            assert t["messages"][turn["message"]]["role"] == "assistant"
            assert t["messages"][turn["message"] - 1]["role"] == "user"
    print(f"seq-sgd: {len(sample(rows))} dialogues rebuilt whole, of {len(rows)} kept")


def test_sgd_every_kept_dialogue_has_the_corpus_utterances_and_counts_add_up(sgd):
    rows, corpus = sgd
    for split, t, _ in rows:
        assert utterances(steps(t)) == utterances(sgd_steps(corpus[t["id"]])), t["id"]
    counts = report("seq-sgd")
    for split, c in counts.items():
        in_corpus = sum(1 for k in corpus if k.startswith(f"seq-sgd/{split}/"))
        assert c["attempted"] == in_corpus == c["kept"] + c["dropped"], (split, c, in_corpus)
        assert c["kept"] == sum(1 for s, _, _ in rows if s == split)
    print("seq-sgd dialogue trajectories:", json.dumps(counts))


# ---------------------------------------------------------------- MultiWOZ

def norm(s):
    s = s.strip().lower().replace("&", " and ")
    if s.startswith("the "):
        s = s[4:]
    return "".join(c for c in s if c.isalnum())


def minutes(t):
    t = t.strip().lower()
    pm = t.endswith("pm")
    t = t.removesuffix("pm").removesuffix("am").strip()
    h, m = t.split(":")
    h, m = int(h), int(m)
    return ((h + 12) if pm and h < 12 else h) * 60 + m


def db_search(db, domain, args):
    def keep(row):
        for arg, value in args.items():
            suffix = arg.split("-", 1)[1]
            if domain == "train" and suffix == "leaveat":
                if minutes(row["leaveAt"]) < minutes(value):
                    return False
            elif domain == "train" and suffix == "arriveby":
                if minutes(row["arriveBy"]) > minutes(value):
                    return False
            else:
                wanted = {("yes" if suffix in ("parking", "internet") and norm(a) == "free" else norm(a)) for a in value.split("|")}
                cell = row.get(suffix)
                if norm(cell if isinstance(cell, str) else json.dumps(cell)) not in wanted:
                    return False
        return True
    rows = [r for r in db[domain] if keep(r)]
    shown = rows[::-1] if domain == "train" and "train-arriveby" in args and "train-leaveat" not in args else rows
    return {"total": len(rows), "results": shown[:10]}


def semi(meta, domain):
    s = meta.get(domain, {}).get("semi", {})
    return {k: v.strip() for k, v in s.items() if isinstance(v, str) and v.strip() not in UNSET and v.strip() != "dontcare"}


def value_ok(db, domain, suffix, got, said):
    """`got` is the state's value `said`, equal once normalised, or a database spelling of it."""
    if got == said or norm(got) == norm(said) or got.replace(" ", "") == said.replace(" ", ""):
        return True
    values = {r.get(suffix) for r in db.get(domain, []) if isinstance(r.get(suffix), str)}
    return got in values


def multiwoz_expected(d, db, tools, t_steps, dial):
    """The steps this reader expects, checking each call the trajectory makes against the
    corpus; the calls' argument values are taken from the trajectory once checked."""
    out = []
    searched, booked_len = {}, {}
    calls = iter([s for s in t_steps if s[0] == "call"])
    for i, entry in enumerate(d["log"]):
        if i % 2 == 0:
            out.append(("user", entry["text"]))
            continue
        meta = entry["metadata"]
        for domain in DOMAINS:
            if f"find_{domain}" not in tools:
                continue
            cur = semi(meta, domain)
            if not cur or searched.get(domain) == cur:
                continue
            searched[domain] = cur
            _, name, args = next(calls)
            assert name == f"find_{domain}", (dial, i, name, domain)
            expected_slots = {f"{domain}-{SEMI[k]}" for k in cur if k in SEMI}
            assert set(args) <= expected_slots and args, (dial, i, args, cur)
            for arg, got in args.items():
                said = next(v for k, v in cur.items() if f"{domain}-{SEMI.get(k)}" == arg)
                assert value_ok(db, domain, arg.split("-", 1)[1], got, said), (dial, i, arg, got, said)
            out.append(("call", name, args))
            out.append(("result", db_search(db, domain, args)))
        for domain in DOMAINS:
            booked = meta.get(domain, {}).get("book", {}).get("booked", [])
            before = min(booked_len.get(domain, 0), len(booked))
            booked_len[domain] = len(booked)
            for entry_booked in booked[before:]:
                if f"book_{domain}" not in tools:
                    continue
                _, name, args = next(calls)
                assert name == f"book_{domain}", (dial, i, name)
                key = {"train": "trainID", "taxi": None}.get(domain, "name")
                slot = {"train": "train-trainid"}.get(domain, f"{domain}-name")
                if key and entry_booked.get(key):
                    got = norm(args[slot])
                    want = norm(entry_booked[key])
                    assert got.startswith(want) or want.startswith(got), (dial, i, args, entry_booked)
                out.append(("call", name, args))
                out.append(("result", entry_booked))
        out.append(("reply", entry["text"]))
    return out


@pytest.fixture(scope="module")
def multiwoz():
    rows = trajectories("seq-multiwoz")
    assert rows, "build seq-multiwoz first"
    base = os.path.join(CORPORA, "multiwoz", "MultiWOZ_2.1")
    corpus = {}
    for split, name in (("dev", "val.json"), ("test", "test.json"), ("train", "train.json")):
        path = os.path.join(base, name)
        if os.path.isfile(path):
            with open(path) as f:
                for k, v in json.load(f).items():
                    corpus[f"seq-multiwoz/{split}/{k.removesuffix('.json')}"] = v
    db = {}
    for domain in ("restaurant", "hotel", "attraction", "train", "hospital"):
        with open(os.path.join(base, "db", f"{domain}_db.json")) as f:
            db[domain] = json.load(f)
    return rows, corpus, db


def test_multiwoz_dialogues_rebuilt_from_the_corpus_turn_by_turn(multiwoz):
    rows, corpus, db = multiwoz
    for split, t, gold in sample(rows):
        tools = {f["function"]["name"] for f in t["tools"]}
        got = steps(t)
        assert got == multiwoz_expected(corpus[t["id"]], db, tools, got, t["id"]), t["id"]
        calls = [(c["name"], json.loads(c["arguments"])) for turn in gold["turns"] for c in turn["calls"]]
        assert calls == [(s[1], s[2]) for s in got if s[0] == "call"], t["id"]
    print(f"seq-multiwoz: {len(sample(rows))} dialogues rebuilt whole, of {len(rows)} kept")


def test_multiwoz_every_kept_dialogue_has_the_corpus_utterances_and_counts_add_up(multiwoz):
    rows, corpus, _ = multiwoz
    for split, t, _ in rows:
        want = [("user" if i % 2 == 0 else "reply", e["text"]) for i, e in enumerate(corpus[t["id"]]["log"])]
        assert utterances(steps(t)) == want, t["id"]
    counts = report("seq-multiwoz")
    for split, c in counts.items():
        in_corpus = sum(1 for k in corpus if k.startswith(f"seq-multiwoz/{split}/"))
        assert c["attempted"] == in_corpus == c["kept"] + c["dropped"], (split, c, in_corpus)
        assert c["kept"] == sum(1 for s, _, _ in rows if s == split)
    print("seq-multiwoz dialogue trajectories:", json.dumps(counts))


def test_two_recipes_dialogue_folders_load_their_own_rows(tmp_path):
    """Both folders are named `dialogue`: loaded one after the other with `load_dataset(<folder>,
    <config>)` into one cache, each gives its own rows (the config names carry the recipe and a
    digest of the files). The gold configs, the smallest files."""
    datasets = pytest.importorskip("datasets")
    for recipe in ("seq-multiwoz", "seq-sgd"):
        folder = os.path.join(OUT, recipe, "trajectories", "dialogue")
        config = next(c for c in datasets.get_dataset_config_names(folder) if "-dialogue-gold-" in c)
        ds = datasets.load_dataset(folder, config, cache_dir=str(tmp_path))
        for split in ds:
            assert ds[split][0]["id"].startswith(f"{recipe}/{split}/"), (recipe, split, ds[split][0]["id"])
            assert len(ds[split]) == report(recipe)[split]["kept"]
