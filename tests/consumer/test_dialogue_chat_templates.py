"""The multi-turn dialogue trajectories of seq-sgd and seq-multiwoz (issue 45, item 2) rendered
through the chat-template panel of `test_chat_templates.py` (same templates, same tokenizer,
same argument forms, same `KNOWN_BUGS`) and checked FOR CONTENT AND ORDER: in the rendered text,
after the tool list, must appear one after the other
- every user utterance,
- every call's name followed by each of its arguments (as `"key": <JSON>`, Qwen3-Coder's
  `<parameter=key>` or a pythonic `key=<literal>`),
- every tool result (as it is, or JSON-escaped),
- every system utterance (the assistant's replies),
in the order of `messages`; and the tool list and the system prompt somewhere. A template that
raises fails the dialogue. Known template bugs exclude the dialogues they alone break, counted
and printed. Acceptance: ≥ 99% of the others faithful through every template.

The panel renders an evenly spaced sample of each dataset's dialogues (`TOOLFORGE_DIALOGUE_PANEL`
dialogues per dataset, default 20: about a minute with the 20 templates); `TOOLFORGE_DIALOGUE_PANEL=all` renders every one."""
import glob
import json
import os

import pytest

from test_chat_templates import KNOWN_BUGS, MIN_FAITHFUL, TEMPLATE_KWARGS, TEMPLATES, argument_forms, escaped, name, tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATASETS = ["seq-sgd", "seq-multiwoz"]
PANEL = os.environ.get("TOOLFORGE_DIALOGUE_PANEL", "20")


def dialogues(dataset):
    out = []
    pattern = os.path.join(ROOT, "out", dataset, "trajectories", "dialogue", "*.jsonl")
    for path in sorted(glob.glob(pattern)):
        if not path.endswith(".gold.jsonl"):
            with open(path) as f:
                out += [json.loads(line) for line in f]
    if PANEL != "all" and len(out) > int(PANEL):
        step = len(out) / int(PANEL)
        out = [out[int(i * step)] for i in range(int(PANEL))]
    return out


def find(text, forms, start):
    """The end of the first of `forms` found in `text` at or after `start`, else -1."""
    hits = [(i, len(f)) for f in forms if (i := text.find(f, start)) >= 0]
    if not hits:
        return -1
    i, n = min(hits)
    return i + n


def failed_checks(text, t):
    """The checks (`tools`, `system`, `user`, `call`, `arguments`, `result`, `reply`) dialogue
    `t` fails in its rendering `text`; `order` when every item is there but out of order. A
    call's name must follow the items before it (the tool list names it too), and its arguments
    must stand between its name and its result (a result can hold the same `"key": value`)."""
    failed = set()
    m = t["messages"]
    if not all(f["function"]["name"] in text for f in t["tools"]):
        failed.add("tools")
    if not any(e in text for e in escaped(m[0]["content"]) | {m[0]["content"]}):
        failed.add("system")
    pos, in_order = 0, True

    def shown(s):
        return {s} | escaped(s)

    def step(check, forms):
        nonlocal pos, in_order
        at = find(text, forms, pos)
        if at < 0:
            if check == "call" or find(text, forms, 0) < 0:
                failed.add(check)
            else:
                in_order = False
            return
        pos = at

    for i, msg in enumerate(m[1:], start=1):
        if msg["role"] == "user":
            step("user", shown(msg["content"]))
        elif msg["role"] == "tool":
            step("result", shown(msg["content"]))
        elif msg.get("tool_calls"):
            for c in msg["tool_calls"]:
                f = c["function"]
                assert isinstance(f["arguments"], dict), "arguments must be a JSON object"
                before = pos
                step("call", {f["name"]})
                if pos == before and "call" in failed:
                    continue
                result = m[i + 1]["content"] if i + 1 < len(m) and m[i + 1]["role"] == "tool" else None
                ends = [j for e in (shown(result) if result is not None else ()) if (j := text.find(e, pos)) >= 0]
                window = text[pos: min(ends) if ends else len(text)]
                for k, v in f["arguments"].items():
                    if not any(form in window for form in argument_forms(k, v)):
                        failed.add("arguments")
        elif msg["content"]:
            step("reply", shown(msg["content"]))
    if not in_order and not failed:
        failed.add("order")
    return failed


# Template limits that only multi-turn conversations meet, beside `KNOWN_BUGS` (which hold here
# too): each excludes the dialogues it alone breaks, counted and printed.
DIALOGUE_LIMITS = {
    "mistralai-Mistral-Nemo-Instruct-2407": {
        "system": "renders the system prompt only inside the last message when that is a user "
        "message (`loop.last`): a conversation ending with the assistant's reply loses it",
    },
    "ibm-granite-granite-3.3-2B-Instruct": {
        "call": "renders an assistant message's content only, never its tool_calls (the call "
        "names appear in the tool list only)",
    },
}


@pytest.mark.parametrize("template", TEMPLATES, ids=name)
def test_every_dialogue_renders_faithfully_turn_by_turn(template):
    tok = tokenizer(template)
    known = {**KNOWN_BUGS.get(name(template), {}), **DIALOGUE_LIMITS.get(name(template), {})}
    report = []
    for dataset in DATASETS:
        rows = dialogues(dataset)
        assert rows, f"no dialogue trajectories in out/{dataset} (build it first)"
        faithful, excluded, bad = 0, 0, []
        for t in rows:
            err = ""
            try:
                extra = TEMPLATE_KWARGS.get(name(template), lambda t: {})(t)
                text = tok.apply_chat_template(t["messages"], tools=t["tools"], tokenize=False, **extra)
                failed = failed_checks(text, t)
            except AssertionError:
                raise
            except Exception as e:  # noqa: BLE001 — a template error is a failed dialogue, reported
                failed = {"error"}
                err = f"{type(e).__name__}: {e}"[:300]
            if not failed:
                faithful += 1
            elif failed <= set(known):
                excluded += 1
            else:
                bad.append((t["id"], sorted(failed), err))
        considered = len(rows) - excluded
        share = faithful / considered if considered else 1.0
        report.append((dataset, faithful, considered, excluded, share, bad[:3]))
    for dataset, faithful, considered, excluded, share, bad in report:
        extra = f", {excluded} excluded by known bugs" if excluded else ""
        print(f"{name(template)} × {dataset} dialogues: faithful {faithful}/{considered} ({share:.2%}){extra}")
    for dataset, faithful, considered, excluded, share, bad in report:
        assert share >= MIN_FAITHFUL, f"{name(template)} × {dataset}: {share:.2%} faithful; e.g. {bad}"
