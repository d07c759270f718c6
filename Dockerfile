# toolforge in a container (issue 34): the executable, the project's recipes/, sources/ and
# templates/, and the corpora on a volume. Build and push it under the name the Kubernetes
# manifests pull (scripts/k8s/*.yaml; replace registry.example.com with yours, there too):
#   docker build -t registry.example.com/toolforge:0.1.0 . && docker push registry.example.com/toolforge:0.1.0
# Run (corpora in the layout sources/*.toml search: data/spider, data/bird/dev, … under the
# volume; or one variable per source, e.g. TOOLFORGE_SPIDER_DEV=/toolforge/data/spider):
#   docker run --rm -v /srv/corpora:/toolforge/data:ro -v "$PWD/out:/out" \
#     registry.example.com/toolforge:0.1.0 build slot-spider --out /out
# Every node of a sharded build must run the same image: the code fingerprint is part of every
# store key, so shards built from different executables never share items.

# The Rust toolchain is pinned (the version the project is built and tested with).
FROM rust:1.95.0-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src/ src/
COPY templates/ templates/
# A one-shot build gains nothing from the release profile's incremental compilation.
ENV CARGO_INCREMENTAL=0
RUN cargo build --release --locked --bin toolforge

# Runtime: Debian slim with CA certificates (HTTPS to S3 and LLM endpoints); SQLite is linked
# into the executable.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates=20230311* \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 toolforge \
    && useradd --system --uid 10001 --gid 10001 --home-dir /toolforge --shell /usr/sbin/nologin toolforge \
    && mkdir -p /toolforge/out /toolforge/data \
    && chown 10001:10001 /toolforge/out
COPY --from=build /src/target/release/toolforge /usr/local/bin/toolforge
WORKDIR /toolforge
COPY recipes/ recipes/
COPY sources/ sources/
COPY templates/ templates/
# Recipe names resolve under /toolforge from any working directory.
ENV TOOLFORGE_ROOT=/toolforge
# The corpora: mounted here (read-only is enough), in the layout of sources/*.toml, or named
# one by one with TOOLFORGE_<SOURCE> (TOOLFORGE_SPIDER_DEV, TOOLFORGE_BIRD_DEV, …).
VOLUME ["/toolforge/data"]
# Not root: the default output root /toolforge/out (and its store out/.store) is the user's.
USER 10001:10001
ENTRYPOINT ["toolforge"]
CMD ["--help"]
