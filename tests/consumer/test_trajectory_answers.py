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
RECIPES = sorted(d for d in os.listdir(OUT) if os.path.isfile(os.path.join(OUT, d, "trajectories", "README.md"))) if os.path.isdir(OUT) else []
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.]*\d)")


def test_there_are_trajectory_files():
    assert RECIPES, "no built recipe with trajectories under out/ (build them first)"


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
