"""The one documented final-answer style of the trajectories (issue 29, item 7; the card's
"Trajectories" paragraph, `src/emit/trajectories/answer.rs`), checked on every trajectory of every
built recipe against the gold answer (the SQL result, `gold_answer`):

- one sentence (it ends with a period), never a raw JSON row array (`[[…`);
- integers as integers: no integral value written with a fractional part (`4.0`);
- floats at the gold's precision: each non-integral float of the gold that the answer states
  appears as a number equal to it within the gold comparison's 1e-9 relative tolerance, with no
  more decimals than the gold value's shortest representation."""
import glob
import json
import math
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "out")
CARDS = {d: os.path.join(OUT, d, "trajectories", "README.md") for d in (sorted(os.listdir(OUT)) if os.path.isdir(OUT) else [])}
CARDS = {d: p for d, p in CARDS.items() if os.path.isfile(p)}
# What a trajectory card says its lines end with: a final answer in the documented style
# (executable families), or the gold calls (calls-only seq trajectories: no back end, no result,
# no answer; tests/consumer/test_seq_trajectories.py checks every such line against its row).
ANSWER_STYLE = "The final answer is one sentence"
CALLS_ONLY = "The trajectory ends with the calls: no tool result and no final answer."


def card_text(recipe):
    with open(CARDS[recipe]) as f:
        return f.read()


RECIPES = [d for d in CARDS if ANSWER_STYLE in card_text(d)]
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.]*\d)")


def test_there_are_trajectory_files():
    assert RECIPES, "no built recipe with trajectories under out/ (build them first)"


def test_every_trajectory_card_says_what_its_lines_end_with():
    """No recipe escapes the answer check silently: its card states the final-answer style, or
    that its trajectories end with the calls; and a calls-only file's first lines do end so."""
    for recipe in CARDS:
        text = card_text(recipe)
        assert (ANSWER_STYLE in text) != (CALLS_ONLY in text), (recipe, "states neither or both")
        if CALLS_ONLY not in text:
            continue
        for path in sorted(glob.glob(os.path.join(OUT, recipe, "trajectories", "*.jsonl")))[:2]:
            with open(path) as f:
                for _, line in zip(range(200), f):
                    t = json.loads(line)
                    last = t["messages"][-1]
                    assert last["role"] == "assistant" and last.get("tool_calls") and not last["content"], (t["id"], last)
                    assert t["gold_answer"] is None, t["id"]


@pytest.mark.parametrize("recipe", RECIPES)
def test_final_answers_are_sentences_with_integers_as_integers_and_floats_at_the_gold_precision(recipe):
    rows, floats, bad = 0, 0, []
    for path in sorted(glob.glob(os.path.join(OUT, recipe, "trajectories", "*.jsonl"))):
        with open(path) as f:
            for line in f:
                t = json.loads(line)
                answer = t["messages"][-1]["content"]
                gold = json.loads(t["gold_answer"]) if isinstance(t["gold_answer"], str) else t["gold_answer"]
                rows += 1
                if not answer.rstrip().endswith(".") or "[[" in answer:
                    bad.append((t["id"], "not a sentence", answer[:120]))
                if re.search(r"(?<![\w.])-?\d+\.0+(?![\d])", answer):
                    bad.append((t["id"], "integral value with a fraction", answer[:120]))
                if not answer.startswith("The answer is "):
                    continue  # (the values of a many-valued answer are checked the same way by answer.rs)
                numbers = NUMBER.findall(answer)
                for cell in (c for row in gold for c in row):
                    if not isinstance(cell, float) or cell.is_integer():
                        continue
                    floats += 1
                    decimals = len(repr(cell).split(".")[-1]) if "e" not in repr(cell) else 17
                    if not any(math.isclose(float(n), cell, rel_tol=1e-9) and len(n.partition(".")[2]) <= decimals for n in numbers):
                        bad.append((t["id"], f"float {cell!r} not at the gold precision", answer[:120]))
    print(f"{recipe}: {rows} final answers, {floats} gold floats checked, {len(bad)} off the style")
    assert rows
    assert not bad, bad[:5]
