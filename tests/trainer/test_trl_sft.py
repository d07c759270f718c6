"""TRL's `SFTTrainer` over the default trajectory export (issue 29, item 5; issue 45, item 5):
slot-spider and rest-spider (every line), seq-atis's calls-only trajectories, seq-sgd's dialogues
(`trajectories/dialogue/`) and the train-mix (`out/train-mix`), each loaded as a consumer would,
with `datasets.load_dataset(<folder>, <default config>)` and the features its `README.md`
declares (the large corpora: `SAMPLE` lines per file at an even stride plus the shapes that
differ — tool messages, parallel calls — loaded from a copy of the card over those lines). A tiny
randomly initialised Llama (2 layers, hidden size 32) trains 2 steps on CPU with
`assistant_only_loss=True`, and the masked targets — the `labels != -100` of TRL's own collator,
for EVERY loaded trajectory, not only the two trained on — decode to exactly the assistant turns as
the template renders them: every call (`{"name": <name>, "arguments": <arguments as JSON>}`,
arguments an object, never JSON text), every assistant text (a dialogue's system replies, the
final answer), each ended by `<|im_end|>`, and nothing else — none of the system prompt, the tool
list, a user turn or a tool result.

Run by `just test-trainer` (tests/trainer/run.sh: a venv with PyTorch, TRL, transformers and
datasets from PyPI). PyTorch from PyPI brings several GB of CUDA libraries, so `.ci/run` does not
install it and says so; here, without torch or trl, the module is skipped with the reason.

The tokenizer is built here (no hub download): byte-level BPE whose merges are learnt from the
loaded rows' renderings (a seq trajectory carries a ~60 KB toolkit: one token per byte made the
two steps' attention too costly on CPU), so decoding the targets gives back exactly the bytes they
cover, plus the template's special tokens. The template is Qwen2.5's with `{% generation %}`
markers (`tests/trainer/qwen2.5-assistant-mask.jinja`; checked here to render byte for byte what
the original renders)."""
import json
import os
import shutil

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: run `just test-trainer`")
trl = pytest.importorskip("trl", reason="TRL is not installed: run `just test-trainer`")

import datasets  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "out")
TEMPLATE = os.path.join(HERE, "qwen2.5-assistant-mask.jinja")
ORIGINAL = os.path.join(ROOT, "tests", "chat_templates", "Qwen-Qwen2.5-7B-Instruct.jinja")
# Corpus → its folder (the one holding the card, `README.md`) under out/, and whether every line
# is trained on (`None`) or a sample (`SAMPLE`). The seq, dialogue and mix files hold 6k-200k
# trajectories of up to ~60 KB each (a byte per token here): a sample keeps the run in minutes.
CORPORA = {
    "slot-spider": ("slot-spider/trajectories", False),
    "rest-spider": ("rest-spider/trajectories", False),
    # calls-only trajectories (issue 45): the assistant's calls end the conversation
    "seq-atis": ("seq-atis/trajectories", True),
    # multi-turn dialogues: user and system turns, calls, the corpus's service results
    "seq-sgd-dialogue": ("seq-sgd/trajectories/dialogue", True),
    # the training mix (`target/release/toolforge build train-mix`)
    "train-mix": ("train-mix", True),
}
# TOOLFORGE_TRAINER_CORPORA (space-separated) restricts the run to those corpora.
if os.environ.get("TOOLFORGE_TRAINER_CORPORA"):
    CORPORA = {k: v for k, v in CORPORA.items() if k in os.environ["TOOLFORGE_TRAINER_CORPORA"].split()}
SAMPLE = int(os.environ.get("TOOLFORGE_TRAINER_SAMPLE", "24"))
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB = 4096


def byte_tokenizer(template_path):
    """A fast tokenizer over the 256 byte-level symbols (no merges) and the template's special
    tokens, carrying the chat template at `template_path`."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    fast.add_special_tokens({"additional_special_tokens": SPECIAL})
    fast.pad_token, fast.eos_token = "<|endoftext|>", "<|im_end|>"
    with open(template_path) as f:
        fast.chat_template = f.read()
    return fast


def trained_tokenizer(template_path, texts):
    """A byte-level BPE tokenizer trained here on `texts` (`VOCAB` tokens: the 256 byte symbols,
    the merges learnt, the template's special tokens), carrying the chat template. Every byte
    string still encodes (byte fallback) and decodes back exactly; GPT-2's pre-tokenizer regex keeps
    a token from crossing a word/whitespace/punctuation boundary, hence the template's `generation`
    boundaries. Why not the one-byte tokenizer: a seq trajectory is ~60 KB (its toolkit), ~4x fewer
    tokens makes the two steps' attention ~16x cheaper on CPU."""
    from tokenizers import trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=SPECIAL, show_progress=False
    )
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    fast.add_special_tokens({"additional_special_tokens": SPECIAL})
    fast.pad_token, fast.eos_token = "<|endoftext|>", "<|im_end|>"
    with open(template_path) as f:
        fast.chat_template = f.read()
    return fast


def card(folder):
    """The card's configs at `folder` (its `README.md` YAML header)."""
    import yaml

    with open(os.path.join(folder, "README.md")) as f:
        return yaml.safe_load(f.read().split("---")[1])["configs"]


def sample_lines(path):
    """`SAMPLE` lines of the file at `path` at an even stride, plus the first `SAMPLE // 4` with a
    tool message and with parallel calls (the shapes that differ), in file order (read twice,
    streaming: a mix's file is GBs)."""
    n, tool, parallel = 0, [], []
    with open(path) as f:
        for i, line in enumerate(f):
            n += 1
            head = line.split(',"tools":', 1)[0]
            if '"role":"tool"' in head and len(tool) < SAMPLE // 4:
                tool.append(i)
            if head.count('"function":{"name"') > 1 and len(parallel) < SAMPLE // 4:
                parallel.append(i)
    picked = set(range(0, n, max(1, n // SAMPLE))) | set(tool) | set(parallel)
    with open(path) as f:
        return [line for i, line in enumerate(f) if i in picked]


def load(corpus, cache_dir):
    """Every split of the corpus's default config (the card's `default: true`), concatenated, as
    `datasets.load_dataset(<folder>, <config>)` reads it with the features the card declares. A
    sampled corpus is loaded the same way from a copy of its card over the sampled lines (same
    relative paths)."""
    rel, sampled = CORPORA[corpus]
    folder = os.path.join(OUT, rel)
    assert os.path.isfile(os.path.join(folder, "README.md")), f"out/{rel}: build it first (tests/trainer/run.sh)"
    # (the card's `default: true` config, else the one named `default`: a mix's card)
    configs = card(folder)
    config = next((c for c in configs if c.get("default")), None) or next(c for c in configs if c["config_name"] == "default")
    if sampled:
        copy = os.path.join(cache_dir, "folder")
        os.makedirs(copy, exist_ok=True)
        shutil.copy(os.path.join(folder, "README.md"), copy)
        for f in config["data_files"]:
            lines = sample_lines(os.path.join(folder, f["path"]))
            os.makedirs(os.path.dirname(os.path.join(copy, f["path"])), exist_ok=True)
            with open(os.path.join(copy, f["path"]), "w") as dst:
                dst.writelines(lines)
        folder = copy
    loaded = datasets.load_dataset(folder, config["config_name"], cache_dir=os.path.join(cache_dir, "hf"))
    return datasets.concatenate_datasets([loaded[s] for s in sorted(loaded)])


def without_nulls(messages):
    """Messages as the file holds them (Arrow fills a message's absent keys with None)."""
    return [{k: v for k, v in m.items() if v is not None} for m in messages]


def rendered_call(call):
    """A call as the Qwen2.5 template writes it (`tojson`: transformers' `json.dumps` with
    `ensure_ascii=False`)."""
    f = call["function"]
    return '<tool_call>\n{"name": "' + f["name"] + '", "arguments": ' + json.dumps(f["arguments"], ensure_ascii=False) + "}\n</tool_call>"


def test_generation_markers_change_no_rendered_byte(tmp_path):
    marked, original = byte_tokenizer(TEMPLATE), byte_tokenizer(ORIGINAL)
    for corpus in CORPORA:
        ds = load(corpus, str(tmp_path / corpus))
        for i in sorted({0, len(ds) // 2, len(ds) - 1}):
            row = ds[i]
            messages = without_nulls(row["messages"])
            a = marked.apply_chat_template(messages, tools=row["tools"], tokenize=False)
            b = original.apply_chat_template(messages, tools=row["tools"], tokenize=False)
            assert a == b, (corpus, row["id"])


def expected_target(messages):
    """What assistant-only loss must train on, exactly: each assistant message as the template
    renders it between its `generation` markers — its text (a dialogue's system reply, the final
    answer) and/or its calls, then `<|im_end|>` — concatenated in order. Nothing else: not the
    system prompt, the tool list, a user turn or a tool result."""
    out = []
    for m in messages:
        if m["role"] != "assistant":
            continue
        if m.get("tool_calls"):
            text = "\n" + m["content"] if m.get("content") else ""
            out.append(text + "".join("\n" + rendered_call(c) for c in m["tool_calls"]) + "<|im_end|>")
        else:
            out.append(m["content"] + "<|im_end|>")
    return "".join(out)


@pytest.mark.parametrize("corpus", list(CORPORA))
def test_sft_two_steps_assistant_only_loss_targets_hold_every_call(corpus, tmp_path):
    from trl import SFTConfig, SFTTrainer

    torch.manual_seed(0)
    ds = load(corpus, str(tmp_path / "cache"))
    # (the tokenizer's merges learnt from the rendering of up to 24 of the rows, at an even stride)
    byte_tok = byte_tokenizer(TEMPLATE)
    texts = [
        byte_tok.apply_chat_template(without_nulls(ds[i]["messages"]), tools=ds[i]["tools"], tokenize=False)
        for i in range(0, len(ds), max(1, len(ds) // 24))
    ]
    tok = trained_tokenizer(TEMPLATE, texts)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=1 << 17,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
    )
    model = LlamaForCausalLM(config)
    args = SFTConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=2,
        per_device_train_batch_size=1,
        assistant_only_loss=True,
        max_length=None,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=0,
        dataloader_num_workers=0,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tok)
    train = trainer.train_dataset
    assert len(train) == len(ds), "TRL dropped trajectories"

    wrong, missing, leaked, target_tokens, all_tokens = [], [], [], 0, 0
    calls_seen = replies_seen = 0
    # (TRL keeps the dataset's order; a clean line and its faulted version share an `id`)
    for example, row in zip(train, ds):
        labels = trainer.data_collator([example])["labels"][0]
        kept = [int(t) for t in labels if t != -100]
        target_tokens += len(kept)
        all_tokens += len(labels)
        target = tok.decode(kept)
        messages = without_nulls(row["messages"])
        if target != expected_target(messages):
            wrong.append(row["id"])
        calls = [c for m in messages for c in m.get("tool_calls") or []]
        replies = [m["content"] for m in messages if m["role"] == "assistant" and m.get("content")]
        calls_seen += len(calls)
        replies_seen += len(replies)
        # every call (name and arguments as the template writes them) and every assistant text
        want = [rendered_call(c) for c in calls] + [r for r in replies]
        missing += [(row["id"], w[:120]) for w in want if w not in target]
        # never the system prompt, a user turn or a tool result (the short ones — "yes", "[]" —
        # are covered by the exact comparison above), nor the markers of those turns
        unwanted = ["<|im_start|>", "<tool_response>", messages[0]["content"]]
        unwanted += [m["content"] for m in messages if m["role"] in ("user", "tool") and len(m["content"]) > 40]
        leaked += [(row["id"], u[:120]) for u in unwanted if u in target]

    result = trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    print(
        f"{corpus}: {len(train)} trajectories tokenised ({calls_seen} calls, {replies_seen} assistant texts), "
        f"{target_tokens}/{all_tokens} tokens ({target_tokens / all_tokens:.2%}) trained on (assistant-only); "
        f"2 steps: losses {[round(x, 4) for x in losses]}, {result.metrics['train_runtime']:.1f} s; "
        f"targets not exactly the assistant turns {len(wrong)}, calls/texts missing from the targets {len(missing)}, "
        f"prompt/user/tool text in the targets {len(leaked)}"
    )
    assert not wrong, wrong[:5]
    assert not missing, missing[:5]
    assert not leaked, leaked[:5]
    assert calls_seen > 0
    assert trainer.state.global_step == 2
    assert len(losses) == 2 and all(x == x and x > 0 for x in losses), losses
