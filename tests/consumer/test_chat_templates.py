"""Every trajectory of slot-spider and rest-spider (clean and faulted) and of the three
`*-variants` datasets (their variant rows included: issue 16) rendered through the chat
templates of four model families with `transformers`' `apply_chat_template(messages, tools=…)`:
SmolLM2, Qwen3, Llama 3.2 and Mistral Nemo (the real templates, kept in tests/chat_templates/;
origins in its README). A template that raises (e.g. on `content: null`, or on a tool-call id
that is not 9 alphanumeric characters) fails the test."""
import glob
import json
import os

import pytest
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATES = sorted(glob.glob(os.path.join(ROOT, "tests", "chat_templates", "*.jinja")))
VARIANT_DATASETS = ["slot-spider-variants", "sel-spider-variants", "rest-spider-variants"]
DATASETS = ["slot-spider", "rest-spider"] + VARIANT_DATASETS
# The variant kinds whose trajectories change what the model sees (paraphrase only when the
# build had an LLM endpoint; distractors only where the family has a pool).
VARIANT_KINDS = {"perturb", "drift", "obfuscate", "shortlist", "distractors"}


def tokenizer(template_path):
    vocab = {"[UNK]": 0, "<s>": 1, "</s>": 2}
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="[UNK]")),
        bos_token="<s>",
        eos_token="</s>",
        unk_token="[UNK]",
    )
    tok.chat_template = open(template_path).read()
    return tok


def trajectories(dataset):
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "out", dataset, "trajectories", "*.jsonl"))):
        with open(path) as f:
            out += [json.loads(line) for line in f]
    return out


def test_four_template_families():
    assert len(TEMPLATES) == 4, TEMPLATES


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: os.path.basename(p))
@pytest.mark.parametrize("dataset", DATASETS)
def test_every_trajectory_renders(dataset, template):
    tok = tokenizer(template)
    rows = trajectories(dataset)
    assert rows, f"no trajectories in out/{dataset}"
    failures = []
    for t in rows:
        try:
            text = tok.apply_chat_template(t["messages"], tools=t["tools"], tokenize=False)
            assert t["messages"][-1]["content"] in text or "Llama" in template
        except Exception as e:  # noqa: BLE001 — every failure is collected and reported
            failures.append((t["id"], f"{type(e).__name__}: {e}"))
    print(f"{dataset} × {os.path.basename(template)}: {len(rows) - len(failures)}/{len(rows)} rendered")
    assert not failures, f"{len(failures)} of {len(rows)} fail: {failures[:5]}"


def variant_kind(trajectory_id):
    """`<parent id>/<kind>[-<sub>]` → kind (None for a verified example's id)."""
    head, _, tail = trajectory_id.rpartition("/")
    kind = tail.split("-")[0]
    return kind if head and kind in VARIANT_KINDS | {"paraphrase"} else None


@pytest.mark.parametrize("dataset", VARIANT_DATASETS)
def test_variant_rows_have_trajectories(dataset):
    """Each `*-variants` dataset's trajectories include variant rows of every kind, each showing
    the variant's request and tools (the drift row: A_new tools; obfuscate: `FUNC_i` names)."""
    rows = trajectories(dataset)
    by_id = {t["id"]: t for t in rows}
    kinds = {}
    for t in rows:
        k = variant_kind(t["id"])
        if k:
            kinds[k] = kinds.get(k, 0) + 1
    print(f"{dataset}: variant trajectories per kind {kinds}")
    assert VARIANT_KINDS <= set(kinds), kinds
    for t in rows:
        k = variant_kind(t["id"])
        parent = by_id.get(t["id"].rpartition("/")[0])
        if not k or parent is None:
            continue
        names = {f["function"]["name"] for f in t["tools"]}
        called = [c["function"]["name"] for m in t["messages"] for c in m.get("tool_calls") or []]
        assert set(called) <= names, (t["id"], called)
        assert t["messages"][-1] == parent["messages"][-1], t["id"]
        if k == "obfuscate":
            assert all(n.startswith("FUNC_") for n in names), t["id"]
        if k in ("distractors", "shortlist"):
            assert len(t["tools"]) != len(parent["tools"]), t["id"]
        if k == "perturb":
            assert t["messages"][1]["content"] != parent["messages"][1]["content"], t["id"]
