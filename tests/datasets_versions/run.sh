#!/usr/bin/env bash
# `just test-datasets-versions`: tests/datasets_versions/test_load_every_trajectory_file.py in one
# venv per `datasets` version (3.6.0, the newest 4.x, the newest 5.x; from PyPI, about 150 MB
# each, made under /tmp and deleted at the end) over every built trajectory folder under out/ (recipes'
# trajectories/, SGD/MultiWOZ trajectories/dialogue/, mixes) and `target/release/toolforge trajectories
# --format openai-text` of each.
# Not in `.ci/run` (three venvs); `just test` checks the installed 5.x (tests/consumer/test_hf_card.py)
# and pins the Arrow schema (tests/consumer/test_trajectory_arrow_schema.py). TOOLFORGE_TRAJECTORY_RECIPES
# (space-separated) restricts the run to those recipes.
set -euo pipefail
cd "$(dirname "$0")/../.."
ls out/*/trajectories/README.md out/*/README.md > /dev/null || { echo "no built trajectories under out/: build recipes first" >&2; exit 1; }
base="$(mktemp -d /tmp/toolforge-datasets.XXXXXX)"
trap 'rm -rf "$base"' EXIT
status=0
for spec in "datasets==3.6.0" "datasets>=4,<5" "datasets>=5,<6"; do
    venv="$base/venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec" pytest pyyaml
    echo "== $("$venv/bin/python" -c 'import datasets; print("datasets", datasets.__version__)')"
    HF_DATASETS_DISABLE_PROGRESS_BARS=1 "$venv/bin/python" -m pytest tests/datasets_versions -q -rxs -p no:cacheprovider || status=1
done
exit $status
