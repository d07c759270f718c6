"""Runs BFCL's own AST checker (PyPI `bfcl-eval`) on predictions, for tests/eval_bfcl.rs.

    python3 tests/eval_bfcl_check.py BFCL_ROOT ITEMS.jsonl > VERDICTS.jsonl

    python3 tests/eval_bfcl_check.py BFCL_ROOT ITEMS.jsonl --docs > DOCS.jsonl

ITEMS.jsonl: one `{"n": <item number>, "bfcl_id": "simple_python_0", "category": "simple_python",
"output": [{"name": <OpenAI name>, "arguments": {...}}]}` per line. BFCL_ROOT holds the corpus
question files (`BFCL_v4_<category>.json`) and `possible_answer/`: the function docs and the gold
are BFCL's own, read here, not ours. Each item is checked with
`bfcl_eval.eval_checker.ast_eval.ast_checker.ast_checker` (the category's language: Java for
`simple_java`, JavaScript for `simple_javascript`, else Python; the item's category) and printed
as `{"n": ..., "valid": bool, "error_type": ...}`. With `--docs`, each item's question's function
docs as BFCL shows them to the model (`bfcl_eval.utils._func_doc_language_specific_pre_processing`)
are printed instead: `{"n": ..., "functions": [...]}`.

`bfcl-eval`'s model registry (`bfcl_eval.constants.model_config`) imports every provider SDK;
only its `underscore_to_dot` flag matters to the AST checker, so a one-entry registry stands in
for it: a function-calling model whose tool names have `.` replaced by `_` (OpenAI's rule, and
ours).
"""

import copy
import json
import sys
import types

stub = types.ModuleType("bfcl_eval.constants.model_config")


class _Config:
    underscore_to_dot = True


stub.MODEL_CONFIG_MAPPING = {"toolforge-eval": _Config()}
sys.modules["bfcl_eval.constants.model_config"] = stub

from bfcl_eval.constants.enums import Language  # noqa: E402
from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # noqa: E402


def language(category):
    if "javascript" in category:
        return Language.JAVASCRIPT
    if "java" in category:
        return Language.JAVA
    return Language.PYTHON


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    root, items_path = sys.argv[1], sys.argv[2]
    questions, gold = {}, {}
    for category in (
        "simple_python",
        "simple_java",
        "simple_javascript",
        "multiple",
        "parallel",
        "parallel_multiple",
    ):
        try:
            for q in read_jsonl(f"{root}/BFCL_v4_{category}.json"):
                questions[q["id"]] = q
            for a in read_jsonl(f"{root}/possible_answer/BFCL_v4_{category}.json"):
                gold[a["id"]] = a["ground_truth"]
        except FileNotFoundError:
            pass
    docs = len(sys.argv) > 3 and sys.argv[3] == "--docs"
    for item in read_jsonl(items_path):
        q = questions[item["bfcl_id"]]
        if docs:
            from bfcl_eval.utils import _func_doc_language_specific_pre_processing

            shown = _func_doc_language_specific_pre_processing(copy.deepcopy(q["function"]), item["category"])
            print(json.dumps({"n": item["n"], "functions": shown}))
            continue
        model_output = [{c["name"]: c["arguments"]} for c in item["output"]]
        try:
            r = ast_checker(
                q["function"],
                model_output,
                gold[item["bfcl_id"]],
                language(item["category"]),
                item["category"],
                "toolforge-eval",
            )
            verdict = {"valid": bool(r["valid"]), "error_type": r.get("error_type")}
        except Exception as e:  # BFCL's checker raising is a failed check for BFCL's runner too
            verdict = {"valid": False, "error_type": f"exception:{type(e).__name__}"}
        print(json.dumps({"n": item["n"], **verdict}))


if __name__ == "__main__":
    main()
