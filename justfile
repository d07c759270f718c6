# toolforge tasks. `just --list` shows them.

# Every recipe `just test` builds.
recipes := "slot-spider slot-bird sel-spider sel-bird rest-spider rest-bird seq-atis seq-snips seq-topv2 seq-sgd seq-multiwoz mcp-tools bfcl"
# The datasets whose rows `toolforge verify` re-executes (REST through the live server).
executable := "slot-spider slot-bird sel-spider sel-bird rest-spider rest-bird"

# Build a dataset from recipes/RECIPE.toml into out/RECIPE/ (release mode).
build-dataset RECIPE:
    cargo run --release --quiet -- build {{RECIPE}}

# Serve a built dataset's tools on 127.0.0.1:8000 (REST endpoints or SLOT/SEL sessions).
serve RECIPE:
    cargo run --release --quiet -- serve {{RECIPE}}

# Run the whole test suite: Rust unit + integration tests, every recipe built and verified, then
# the pyarrow/sqlite3 consumer, live-server and FastAPI conformance tests.
test:
    cargo test --release
    # `cargo test` built target/release/toolforge (the integration tests run it); a separate
    # `cargo build` would rebuild half the dependency tree for the dev-dependency feature set.
    for r in {{recipes}}; do target/release/toolforge build $r --quiet > /dev/null; done
    for r in {{executable}}; do target/release/toolforge verify out/$r; done
    python3 -m pytest tests/consumer tests/conformance -q

# The LLM integration test alone (tests/llm-server: node-llama-cpp + SmolLM2 on 127.0.0.1).
test-llm:
    bash tests/llm-server/setup.sh
    cargo test --release --test llm -- --nocapture

# Time cold builds, no-op rebuilds, peak RSS, the live server under load (wrk), and evaluation
# (scoring throughput on 10,000 predictions, agent-mode overhead per step without the model).
bench:
    bash benches/bench.sh
    bash benches/serve.sh
    bash benches/eval.sh

# The evaluation benchmark alone.
bench-eval:
    bash benches/eval.sh

# What CI runs.
ci:
    bash .ci/run
