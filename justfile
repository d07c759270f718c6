# toolforge tasks. `just --list` shows them, one line each.
#
# `just test` runs `cargo test --release` first: that builds target/release/toolforge (the
# integration tests run it); a separate `cargo build` would rebuild half the dependency tree for
# the dev-dependency feature set. Then every recipe is built and the executable ones verified.

# Every recipe `just test` builds.
recipes := "slot-spider slot-spider-reference slot-bird sel-spider sel-spider-reference sel-bird rest-spider rest-bird seq-atis seq-snips seq-topv2 seq-sgd seq-multiwoz mcp-tools bfcl slot-spider-variants sel-spider-variants rest-spider-variants"
# The datasets whose rows `toolforge verify` re-executes (REST through the live server).
executable := "slot-spider slot-spider-reference slot-bird sel-spider sel-spider-reference sel-bird rest-spider rest-bird"

# Install the `toolforge` command into ~/.cargo/bin (cargo install --path . --locked).
install:
    @cargo install --quiet --path . --locked
    @echo "installed: $(command -v toolforge || echo "$HOME/.cargo/bin/toolforge (add ~/.cargo/bin to PATH)")"

# Build a dataset from recipes/RECIPE.toml into out/RECIPE/ (release mode).
build-dataset RECIPE:
    @cargo run --release --quiet -- build {{RECIPE}}

# Serve a built dataset's tools on 127.0.0.1:8000 (REST endpoints or SLOT/SEL sessions).
serve RECIPE:
    @cargo run --release --quiet -- serve {{RECIPE}}

# Whole test suite: cargo tests, every recipe built and verified, Python consumer/conformance tests,
# the report pages in headless chromium (tests/browser; skipped, loudly, without chromium)
# and the replay of slot-spider-reference and sel-spider-reference through IBM's reference tools (skipped, loudly, when
# they are not importable: not on PyPI; see tests/reference/replay.py). A passing pytest test's
# tmp_path is removed when it ends (the `datasets` cache of a loaded split is hundreds of MB).
test:
    @cargo test --release
    @for r in {{recipes}}; do echo "build $r"; target/release/toolforge build $r --quiet > /dev/null; done
    @for r in {{executable}}; do printf '%s ' $r; target/release/toolforge verify out/$r; done
    @python3 -m pytest tests/consumer tests/conformance tests/browser tests/reference/replay.py -q -rs -o tmp_path_retention_policy=failed

# The LLM integration tests alone (tests/llm-server: node-llama-cpp + SmolLM2 on 127.0.0.1):
# live requests, the Batch API, LLM requests shared out by shards.
test-llm:
    @bash tests/llm-server/setup.sh
    @cargo test --release --test llm_setup --test llm --test llm_batch -- --nocapture

# tests/trainer/run.sh: a venv with torch, trl, transformers, datasets from PyPI (~6 GB, deleted at
# the end; TOOLFORGE_TRAINER_VENV reuses one). Not in `just test` / CI.
# TRL's SFTTrainer: 2 steps on CPU over slot-spider/rest-spider, seq-atis (calls-only), seq-sgd
# dialogues and the train-mix (builds what is absent: seq-topv2 ~45 min), assistant-only loss.
test-trainer:
    @cargo test --release --no-run --quiet
    @bash tests/trainer/run.sh

# tests/datasets_versions/run.sh, one venv each; build the recipes first (`just test` does).
# Every built trajectory folder (recipes, dialogues, mixes) loaded by datasets 3.6.0, the newest
# 4.x and 5.x, and `toolforge trajectories --format openai-text` (the 3.x route).
test-datasets-versions:
    @cargo test --release --no-run --quiet
    @bash tests/datasets_versions/run.sh

# Every benchmark: builds (cold, no-op) with peak RSS, the live server (wrk), session memory, eval throughput, tool retrieval, REST memory against one database's questions.
bench:
    @bash benches/bench.sh
    @bash benches/serve.sh
    @bash benches/sessions.sh
    @bash benches/eval.sh
    @bash benches/retrieval.sh
    @bash benches/rest_memory.sh

# The server's RSS idle, at peak and 10 s after a load (REST with wrk, SLOT sessions): memory returned to the system.
bench-memory:
    @cargo test --release --no-run --quiet
    @bash benches/rss_after_load.sh

# Tool retrieval alone: the 10,000-tool BM25 index (build time, peak RSS, query p50/p99) and BM25 recall per retrieval dataset.
bench-retrieval:
    @bash benches/retrieval.sh

# Scale-out CPU (issue 34): whole build vs shards (two rounds) and merge at N=4, with ratios.
bench-scale-cpu:
    @bash benches/scale_cpu.sh

# Shard balance (issue 34): worst/average shard CPU of both rounds at N=16 on 100 synthetic databases (benches/synth.py).
bench-balance-synth:
    @bash benches/balance_synth.sh

# The evaluation benchmark alone (scoring throughput, agent-mode overhead per step).
bench-eval:
    @bash benches/eval.sh

# BIRD mini-dev construct coverage (issue 27's method): the ten absent databases rebuilt empty from
# mini_dev_sqlite_tables.json, empty and degenerate answers kept, so only the lowering decides a row.
# (`cargo test --no-run` builds the executable with the test suite's feature set, as `just test` does.)
# FORMAT is slot, sel or rest; prints `coverage FORMAT: K / 500 (P%)` and the drops by reason.
bird-coverage FORMAT="slot":
    @cargo test --release --no-run --quiet
    @python3 scripts/bird_coverage.py --format {{FORMAT}}

# Fuzz every target SECONDS each (libFuzzer via cargo-fuzz, nightly; seeds from ../shared/corpora).
fuzz SECONDS="600":
    @bash fuzz/run.sh {{SECONDS}}

# What CI runs (.ci/run: installs the test dependencies, then `just test`).
ci:
    @bash .ci/run
