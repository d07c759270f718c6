# toolforge tasks. `just --list` shows them.

# Build a dataset from recipes/RECIPE.toml into out/RECIPE/ (release mode).
build-dataset RECIPE:
    cargo run --release --quiet -- build {{RECIPE}}

# Run the whole test suite: Rust unit + integration tests, then the pyarrow/sqlite3 consumer test.
test:
    cargo test --release
    cargo run --release --quiet -- build slot-spider --quiet
    cargo run --release --quiet -- build slot-bird --quiet
    cargo run --release --quiet -- verify out/slot-spider
    cargo run --release --quiet -- verify out/slot-bird
    python3 -m pytest tests/consumer -q

# Time cold builds, no-op rebuilds and peak RSS on the shared corpora.
bench:
    bash benches/bench.sh

# What CI runs.
ci:
    bash .ci/run
