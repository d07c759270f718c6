"""An independent judge of `toolforge eval score`: the papers' sequence metrics written here from
their definitions (not from `src/eval/metrics`), applied to prediction files made by transforming
the gold of built datasets, and compared with what `toolforge eval score` writes, row by row and
in the totals.

Definitions (per row; "both sides empty" scores P = R = F1 = 1, "one side empty" 0):

- Live API-Bench §4.1.1 *intent*: the predicted API at position i is right when the gold API at
  position i has its name (position-aware) — on a row whose calls are a program (text-to-SQL
  rows: a `sql` field; `ordered` there is about the answer's rows). On a row whose call order is
  free (`ordered: false` and no `sql`: MixATIS/MixSNIPS clauses, BFCL parallel) a predicted API
  is right when an unused gold call has its name (multiset). P = right / predicted, R = right /
  gold.
- Live API-Bench §4.1.1 *slot*, "conditional on the correct intent": only over the gold and
  predicted calls paired by intent (free rows: the pairing that agrees on the most arguments); a
  predicted argument is right when its paired gold call has that parameter with an equal value;
  P = right / predicted arguments of paired calls, R = right / gold arguments of paired calls; a
  row without a pair has no slot score (left out of the slot mean).
- API-BLEND §5.4 *API-F1*: API names as multisets. *Parameter-F1*: (parameter name, value) pairs
  of all the row's calls as multisets — pooled over the row, not within matched APIs; a row where
  neither side has a pair scores 1 only when both made calls or neither did. *Parameter-F1 by
  API* (toolforge's variant, reported beside it): the same over (API, name, value) triples.
  *LCS-F1*: LCS precision = |LCS of the name sequences| / predicted, recall = ... / gold; the
  dataset's LCS-F1 is the F1 of mean precision and mean recall. *Exact match*: the same calls
  (names and arguments) in the same order (free rows: the same multiset).
- Values: numbers by value (1 == 1.0), objects whatever their key order. A `$label$` argument is a
  reference, bound (as execution binds it) to the latest *earlier* call carrying that label, the
  setup steps first; it means the call it is bound to — its name and its arguments, references
  in them replaced the same way (alpha-equivalence: label names never matter). A label no earlier
  call carries is free and means only its own text, so a reference to a dropped call matches
  nothing.

Transformations of the gold: the gold itself, labels renamed (`OUT_0`, ...), calls reversed, the
first call dropped, the first call's API renamed, each call's argument values rotated among its
parameters (keys in another order), and the empty prediction. Datasets: slot-spider, rest-spider
and the seq-atis test split (its default split: the report must say `test` and hold 828 rows).
`python3 tests/consumer/test_eval_independent.py` prints the agreement table (TOOLFORGE_BIN picks
another binary)."""
import itertools
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("TOOLFORGE_BIN", os.path.join(ROOT, "target", "release", "toolforge"))
OUT = os.path.join(ROOT, "out")
DATASETS = ["slot-spider", "rest-spider", "seq-atis"]
ROW_METRICS = ["intent", "slot", "api", "parameter", "parameter_by_api", "lcs", "exact_match"]


# ---------------------------------------------------------------- reading the gold


def load_rows(dataset):
    """Rows of the split a run scores by default: `test` where a dataset has it, else all (the
    papers report test-split numbers)."""
    data = os.path.join(OUT, dataset, "data")
    names = ["test.jsonl"] if os.path.isfile(os.path.join(data, "test.jsonl")) else sorted(
        n for n in os.listdir(data) if n.endswith(".jsonl"))
    rows = []
    for name in names:
        with open(os.path.join(data, name)) as f:
            rows += [json.loads(line) for line in f]
    return rows


def as_json(v):
    return json.loads(v) if isinstance(v, str) else v


def calls_of(raw):
    return [{"name": c["name"], "arguments": as_json(c["arguments"]) or {}, "label": c.get("label") or ""} for c in raw]


def setup_of(row):
    steps = []
    if row.get("initialization_step"):
        steps.append(as_json(row["initialization_step"]))
    steps += as_json(row.get("additional_setup_steps")) or []
    return calls_of(steps)


def gold_of(row):
    calls = calls_of(row["output"])
    setup_names = {s["name"] for s in setup_of(row)}
    while calls and calls[0]["name"] in setup_names:
        calls = calls[1:]
    return calls


def order_free(row):
    return not row.get("ordered") and row.get("sql") is None


# ---------------------------------------------------------------- meaning of a call


def label_of(v):
    if isinstance(v, str) and len(v) > 2 and v[0] == "$" and v[-1] == "$":
        return v[1:-1]
    return None


def meaning(v, env):
    """A hashable normal form: numbers by value, objects key-sorted, bound references replaced by
    the meaning of the call they are bound to."""
    if isinstance(v, bool) or v is None:
        return ("atom", v)
    if isinstance(v, (int, float)):
        return ("num", float(v))
    if isinstance(v, str):
        lab = label_of(v)
        if lab is not None and lab in env:
            return env[lab]
        return ("str", v)
    if isinstance(v, list):
        return ("list", tuple(meaning(x, env) for x in v))
    return ("obj", tuple(sorted((k, meaning(x, env)) for k, x in v.items())))


def interpret(setup, calls):
    """Each call as (name, {parameter: meaning}), references bound to earlier calls only."""
    env, out = {}, []
    for i, c in enumerate(setup + calls):
        args = {k: meaning(v, env) for k, v in c["arguments"].items()}
        if c["label"]:
            env[c["label"]] = ("call", c["name"], tuple(sorted(args.items())))
        if i >= len(setup):
            out.append((c["name"], args))
    return out


# ---------------------------------------------------------------- metrics


def prf(tp, npred, ngold):
    if npred == 0 and ngold == 0:
        return (1.0, 1.0, 1.0)
    if npred == 0 or ngold == 0:
        return (0.0, 0.0, 0.0)
    p, r = tp / npred, tp / ngold
    return (p, r, 0.0 if p + r == 0 else 2 * p * r / (p + r))


def agree(g, p):
    return sum(1 for k, v in p[1].items() if k in g[1] and g[1][k] == v)


def pairs(gold, pred, free):
    if not free:
        return [(i, i) for i in range(min(len(gold), len(pred))) if gold[i][0] == pred[i][0]]
    out = []
    for name in sorted({g[0] for g in gold}):
        gi = [i for i, g in enumerate(gold) if g[0] == name]
        pj = [j for j, p in enumerate(pred) if p[0] == name]
        if not pj:
            continue
        best, best_score = None, -1
        if len(gi) <= len(pj):
            for perm in itertools.permutations(pj, len(gi)):
                s = sum(agree(gold[i], pred[j]) for i, j in zip(gi, perm))
                if s > best_score:
                    best, best_score = list(zip(gi, perm)), s
        else:
            for perm in itertools.permutations(gi, len(pj)):
                s = sum(agree(gold[i], pred[j]) for i, j in zip(perm, pj))
                if s > best_score:
                    best, best_score = list(zip(perm, pj)), s
        out += best
    return out


def lcs(a, b):
    t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            t[i + 1][j + 1] = t[i][j] + 1 if x == y else max(t[i][j + 1], t[i + 1][j])
    return t[-1][-1]


def bag_prf(gold_items, pred_items, gold_calls, pred_calls):
    if not gold_items and not pred_items and (not gold_calls) != (not pred_calls):
        return (0.0, 0.0, 0.0)
    tp = sum((Counter(gold_items) & Counter(pred_items)).values())
    return prf(tp, len(pred_items), len(gold_items))


def judge(row, pred_calls):
    setup = setup_of(row)
    gold = interpret(setup, gold_of(row))
    pred = interpret(setup, pred_calls)
    free = order_free(row)
    matched = pairs(gold, pred, free)
    out = {"intent": prf(len(matched), len(pred), len(gold))}
    if matched:
        tp = sum(agree(gold[i], pred[j]) for i, j in matched)
        out["slot"] = prf(tp, sum(len(pred[j][1]) for _, j in matched), sum(len(gold[i][1]) for i, _ in matched))
    else:
        out["slot"] = None
    out["api"] = prf(sum((Counter(g[0] for g in gold) & Counter(p[0] for p in pred)).values()), len(pred), len(gold))
    pairs_of = lambda calls: [(k, v) for _, a in calls for k, v in a.items()]
    triples_of = lambda calls: [(n, k, v) for n, a in calls for k, v in a.items()]
    out["parameter"] = bag_prf(pairs_of(gold), pairs_of(pred), gold, pred)
    out["parameter_by_api"] = bag_prf(triples_of(gold), triples_of(pred), gold, pred)
    out["lcs"] = prf(lcs([g[0] for g in gold], [p[0] for p in pred]), len(pred), len(gold))
    key = lambda c: (c[0], tuple(sorted(c[1].items())))
    if free:
        out["exact_match"] = Counter(map(key, gold)) == Counter(map(key, pred))
    else:
        out["exact_match"] = [key(c) for c in gold] == [key(c) for c in pred]
    return out


def totals(judged):
    mean = lambda xs: sum(xs) / len(xs) if xs else None
    t = {}
    for m in ["intent", "api", "parameter"]:
        t[m + "_f1"] = mean([j[m][2] for j in judged])
    t["parameter_f1_by_api"] = mean([j["parameter_by_api"][2] for j in judged])
    t["slot_f1"] = mean([j["slot"][2] for j in judged if j["slot"] is not None])
    p, r = mean([j["lcs"][0] for j in judged]), mean([j["lcs"][1] for j in judged])
    t["lcs_f1"] = 0.0 if p + r == 0 else 2 * p * r / (p + r)
    t["exact_match"] = mean([1.0 if j["exact_match"] else 0.0 for j in judged])
    return t


# ---------------------------------------------------------------- transformations


def renamed_labels(row, calls):
    names = {c["label"]: f"OUT_{i}" for i, c in enumerate(calls) if c["label"]}

    def rename(v):
        lab = label_of(v)
        if lab is not None and lab in names:
            return "$" + names[lab] + "$"
        if isinstance(v, list):
            return [rename(x) for x in v]
        if isinstance(v, dict):
            return {k: rename(x) for k, x in v.items()}
        return v

    return [{"name": c["name"], "arguments": rename(c["arguments"]), "label": names.get(c["label"], "")} for c in calls]


def rotated_arguments(row, calls):
    out = []
    for c in calls:
        keys = list(c["arguments"])
        values = [c["arguments"][k] for k in keys]
        values = values[1:] + values[:1]
        out.append({"name": c["name"], "arguments": dict(reversed(list(zip(keys, values)))), "label": c["label"]})
    return out


def renamed_first_api(row, calls):
    return [dict(c, name=c["name"] + "_renamed") if i == 0 else c for i, c in enumerate(calls)]


TRANSFORMS = {
    "gold": lambda row, calls: calls,
    "labels_renamed": renamed_labels,
    "calls_reversed": lambda row, calls: list(reversed(calls)),
    "first_call_dropped": lambda row, calls: calls[1:],
    "first_api_renamed": renamed_first_api,
    "arguments_rotated": rotated_arguments,
    "empty": lambda row, calls: [],
}


# ---------------------------------------------------------------- comparison


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    return abs(a - b) < 1e-9


def ours_row(r, metric):
    v = r.get(metric, "absent")
    if v == "absent" or v is None or isinstance(v, bool):
        return v
    return (v["p"], v["r"], v["f1"])


def same(a, b):
    if a == "absent":
        return False
    if isinstance(a, tuple) and isinstance(b, tuple):
        return all(close(x, y) for x, y in zip(a, b))
    return a == b


def scored_copy(dataset, workdir):
    """The dataset as `eval score` reads it (MANIFEST.json, tools/, data/*.jsonl), its split other
    than `test` cut to their first 50 rows when it has a test split (seq-atis' train is 789 MB;
    the copy keeps three splits, so the default split is still decided)."""
    src = os.path.join(OUT, dataset)
    if not os.path.isfile(os.path.join(src, "data", "test.jsonl")):
        return src
    dst = os.path.join(workdir, "datasets", dataset)
    if not os.path.isdir(dst):
        os.makedirs(os.path.join(dst, "data"))
        os.symlink(os.path.join(src, "tools"), os.path.join(dst, "tools"))
        os.symlink(os.path.join(src, "MANIFEST.json"), os.path.join(dst, "MANIFEST.json"))
        for name in os.listdir(os.path.join(src, "data")):
            if not name.endswith(".jsonl"):
                continue
            if name == "test.jsonl":
                os.symlink(os.path.join(src, "data", name), os.path.join(dst, "data", name))
                continue
            with open(os.path.join(src, "data", name)) as f, open(os.path.join(dst, "data", name), "w") as g:
                g.writelines(itertools.islice(f, 50))
    return dst


def compare(dataset, transform, workdir):
    rows = load_rows(dataset)
    preds = {r["id"]: TRANSFORMS[transform](r, gold_of(r)) for r in rows}
    path = os.path.join(workdir, f"{dataset}-{transform}.jsonl")
    with open(path, "w") as f:
        for i, calls in preds.items():
            f.write(json.dumps({"id": i, "output": calls}) + "\n")
    run = f"{dataset}-{transform}"
    subprocess.run(
        [BIN, "eval", "score", scored_copy(dataset, workdir), path, "--out", workdir, "--run", run],
        cwd=ROOT, check=True, capture_output=True,
    )
    with open(os.path.join(workdir, run, "rows.jsonl")) as f:
        ours = {r["id"]: r for r in map(json.loads, f)}
    with open(os.path.join(workdir, run, "report.json")) as f:
        report = json.load(f)
    judged = {r["id"]: judge(r, preds[r["id"]]) for r in rows}
    disagreements = Counter()
    examples = {}
    for i, j in judged.items():
        for m in ROW_METRICS:
            if i not in ours or not same(ours_row(ours[i], m), j[m]):
                disagreements[m] += 1
                examples.setdefault(m, (i, ours_row(ours.get(i, {}), m), j[m]))
    theirs = totals(list(judged.values()))
    ours_totals = {k: (report["totals"]["metrics"].get(k) or {}).get("mean") for k in theirs}
    return {
        "rows": len(rows),
        "reported_rows": report["rows"],
        "splits": report.get("splits"),
        "disagreements": dict(disagreements),
        "examples": examples,
        "judge": theirs,
        "ours": ours_totals,
    }


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory(prefix="eval-independent-") as d:
        yield d


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_eval_score_agrees_with_the_independent_judge(dataset, transform, workdir):
    if not os.path.isfile(os.path.join(OUT, dataset, "MANIFEST.json")):
        pytest.skip(f"out/{dataset} is not built (toolforge build {dataset})")
    got = compare(dataset, transform, workdir)
    assert got["reported_rows"] == got["rows"], got
    if dataset == "seq-atis":
        assert got["splits"] == ["test"] and got["rows"] == 828, got
    assert not got["disagreements"], got["examples"]
    for k, v in got["judge"].items():
        assert close(got["ours"][k], v), (k, got["ours"][k], v)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="eval-independent-") as d:
        print("| dataset | transformation | rows | disagreeing rows by metric | judge: intent/slot/API/Param/Param-by-API/LCS/EM F1 | toolforge |")
        print("|---|---|---:|---|---|---|")
        for ds in DATASETS:
            for t in TRANSFORMS:
                g = compare(ds, t, d)
                fmt = lambda tot: " / ".join("–" if tot[k] is None else f"{100 * tot[k]:.1f}" for k in
                                             ["intent_f1", "slot_f1", "api_f1", "parameter_f1", "parameter_f1_by_api", "lcs_f1", "exact_match"])
                print(f"| {ds} | {t} | {g['reported_rows']} | {g['disagreements'] or 0} | {fmt(g['judge'])} | {fmt(g['ours'])} |")
                sys.stdout.flush()
