#!/usr/bin/env bash
# `just test-trainer`: TRL's SFTTrainer over the default trajectory export (tests/trainer/test_trl_sft.py):
# slot-spider, rest-spider, seq-atis (calls-only), seq-sgd's dialogues and the train-mix.
#
# A venv with PyTorch, TRL, transformers and datasets from PyPI. PyPI's torch brings several GB of
# CUDA libraries (about 6 GB in all), so `.ci/run` does not run this; TOOLFORGE_TORCH_INDEX, when
# set, is a pip index to take torch from instead (PyTorch's CPU-only wheel index, where it can be
# reached). TOOLFORGE_TRAINER_VENV names a venv to use (kept); otherwise one is made under /tmp and
# deleted at the end. The recipes are built first when absent (the train-mix needs the five seq
# recipes: seq-topv2 is a 7 GB, ~45 min build); TOOLFORGE_TRAINER_CORPORA (space-separated, e.g.
# "slot-spider seq-atis") restricts the run and the builds to those corpora.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${TOOLFORGE_TRAINER_VENV:-}"
if [ -z "$venv" ]; then
    venv="$(mktemp -d /tmp/toolforge-trainer.XXXXXX)"
    trap 'rm -rf "$venv"' EXIT
fi
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
    if [ -n "${TOOLFORGE_TORCH_INDEX:-}" ]; then
        "${pip[@]}" torch --index-url "$TOOLFORGE_TORCH_INDEX"
    else
        echo "test-trainer: torch from PyPI (with its CUDA libraries, several GB)" >&2
        "${pip[@]}" torch
    fi
fi
"${pip[@]}" trl transformers datasets pytest
df -h "$venv" >&2 || true
corpora="${TOOLFORGE_TRAINER_CORPORA:-slot-spider rest-spider seq-atis seq-sgd-dialogue train-mix}"
need=""
for c in $corpora; do
    case "$c" in
        seq-sgd-dialogue) need="$need seq-sgd" ;;
        train-mix) need="$need seq-atis seq-snips seq-topv2 seq-sgd seq-multiwoz train-mix" ;;
        *) need="$need $c" ;;
    esac
done
for r in $need; do
    [ -f "out/$r/README.md" ] || target/release/toolforge build "$r" --quiet > /dev/null
done
# (no hub: the model and tokenizer are made by the test)
HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOOLFORGE_TRAINER_CORPORA="$corpora" \
HF_DATASETS_DISABLE_PROGRESS_BARS=1 TQDM_DISABLE=1 \
    "$venv/bin/python" -m pytest tests/trainer -q -rs -s -p no:cacheprovider
