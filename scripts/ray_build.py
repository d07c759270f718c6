#!/usr/bin/env python3
"""Sharded toolforge build on a Ray cluster: N shard tasks (retried), then the merge.

Each task runs `toolforge build RECIPE --shard I/N --store STORE` on some node (writing its
stage items into the shared store); when all N have finished, the driver runs
`toolforge build RECIPE --merge N --store STORE --out OUT`, which computes nothing and writes the
dataset. The later stages (LLM requests of paraphrase, seq requests, task synthesis; the
trajectory segments and variants of text-to-SQL recipes) need the whole compiled build: a shard
says so (`round two needed`), and the driver then runs the N shards again, each computing its
share (a third round when a shard's trajectories waited for other shards' LLM answers; shard I/N
paces its LLM requests at `requests_per_second / N`, so the N shards together keep the recipe's
limit). A task whose worker dies (node lost, SIGKILL) or whose toolforge fails is re-run by Ray
(`--retries`); a shard is a pure function of its inputs, so a re-run is harmless. The summary
names every shard's attempts (`attempts, round 1: shard 0/4: 2 (retried) …`).

    python3 scripts/ray_build.py slot-bird --shards 4 --store s3://bucket/toolforge
    RAY_ADDRESS=127.0.0.1:6379 python3 scripts/ray_build.py ...      # an existing cluster's head
    ray job submit -- python3 scripts/ray_build.py ...                # the same as a Ray job
    python3 scripts/ray_build.py slot-spider-paraphrase --shards 4 --store s3://… \\
        --env OPENAI_BASE_URL --env OPENAI_API_KEY                    # LLM endpoint for the tasks

Environment of the tasks: the driver's AWS_* and TOOLFORGE_* variables, plus every `--env NAME`
(repeatable; a declared variable unset on the driver is an error naming it), passed through
Ray's `runtime_env` — the nodes' own environment is not used for them. The merge runs on the
driver with the same variables. A recipe with an LLM stage whose endpoint does not reach the
tasks (no `base_url` in the recipe, no OPENAI_BASE_URL in the tasks' environment) is never
built silently without it: when the driver has OPENAI_BASE_URL (declared nowhere) the driver
stops before any shard runs (exit 3), naming the variables to forward (`--allow-llm-skip`
builds without the stage on purpose); when nobody has an endpoint it says loudly that the
stage is skipped (as a single build skips it).

Without RAY_ADDRESS a local Ray instance is started; the driver prints its node address and
GCS address as Ray reports them. Ray's processes listen on every interface of the machine
(checked with `ss -ltnp` on Ray 2.60: GCS and raylet on `*:port`), with Ray's token
authentication on by default; firewall the machine or give RAY_ADDRESS. The store must be
reachable from every node (S3 for a cluster; a directory is fine on one machine) and every node
must run a byte-identical toolforge executable (README "Scaling out"). A task runs in the
driver's working directory when its node has that path (relative recipe, store and corpus paths
then mean the same on every node), else in Ray's worker directory.

Exit codes: 0 built; 1 a shard failed after its retries (its toolforge output is printed);
2 bad arguments; 3 an LLM stage whose endpoint is on the driver but not in the tasks; otherwise the merge's own exit
code (2 when items are missing from the store), after its message.
"""
import argparse
import os
import signal
import subprocess
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11: the LLM check is skipped with a warning
    tomllib = None

import ray

ROUND_TWO = "round two needed"


def loud(msg):
    """One line on stderr, framed so it stands out in a job log."""
    print(f"\n!!!!! {msg} !!!!!\n", file=sys.stderr, flush=True)


def run(cmd, env, cwd=None):
    """Runs toolforge (in `cwd` when given); raises with its output when it fails (so Ray
    retries the task)."""
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, cwd=cwd)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stdout}{r.stderr}")
    return (r.stdout + r.stderr).strip()


@ray.remote(num_cpus=0)
class Attempts:
    """Counts the attempts of each (round, shard) task: Ray re-runs a task after a failure or a
    lost worker, and every run bumps its count first."""

    def __init__(self):
        self.counts = {}

    def bump(self, key):
        self.counts[key] = self.counts.get(key, 0) + 1
        return self.counts[key]

    def all(self):
        return dict(self.counts)


@ray.remote(num_cpus=1)
def shard(toolforge, recipe, store, index, count, env, kill_marker, attempts, round_no, workdir):
    """One shard, run in the driver's working directory `workdir` when the node has it (else in
    the worker's); `kill_marker` (tests only) makes the first attempt SIGKILL its own worker."""
    ray.get(attempts.bump.remote((round_no, index)))
    if kill_marker and not os.path.exists(kill_marker):
        open(kill_marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    cmd = [toolforge, "build", recipe, "--quiet", "--store", store, "--shard", f"{index}/{count}"]
    return run(cmd, env, workdir if os.path.isdir(workdir) else None)


@ray.remote(num_cpus=0)
def task_env(names):
    """The values of `names` a shard task sees (its runtime_env over the node's environment)."""
    return {k: os.environ.get(k, "") for k in names}


def recipe_file(arg):
    """The recipe file toolforge would read for `arg` (a path, or a name under the project's
    recipes/: nearest ancestor of the working directory with recipes/ and Cargo.toml, else
    $TOOLFORGE_ROOT); None when not found here."""
    if os.path.isfile(arg):
        return arg
    name = arg.removeprefix("recipes/").removesuffix(".toml")
    d = os.getcwd()
    roots = []
    while True:
        roots.append(d)
        if os.path.dirname(d) == d:
            break
        d = os.path.dirname(d)
    roots = [r for r in roots if os.path.isdir(os.path.join(r, "recipes"))
             and os.path.isfile(os.path.join(r, "Cargo.toml"))][:1]
    if os.environ.get("TOOLFORGE_ROOT"):
        roots.append(os.environ["TOOLFORGE_ROOT"])
    for r in roots:
        p = os.path.join(r, "recipes", f"{name}.toml")
        if os.path.isfile(p):
            return p
    return None


def llm_tables(recipe, path):
    """The `[*.llm]` tables of the recipe's LLM stages (paraphrase, catalog task synthesis, seq
    requests over SGD/MultiWOZ), as `(stage, table)`; empty when it has none. Each runs when its
    table or the environment gives an endpoint, and is skipped otherwise (as in toolforge)."""
    v = recipe.get("variants", {})
    out = []
    if "paraphrase" in v:
        out.append(("variants.paraphrase", v.get("llm", {})))
    if recipe.get("format") == "catalog":
        out.append(("catalog task synthesis", recipe.get("catalog", {}).get("llm", {})))
    if recipe.get("format") == "seq":
        d = os.path.dirname(os.path.abspath(path))
        root = os.path.dirname(d) if os.path.basename(d) == "recipes" else d
        source = os.path.join(root, "sources", f"{recipe.get('source', '')}.toml")
        if os.path.isfile(source):
            with open(source, "rb") as f:
                if tomllib.load(f).get("format") in ("sgd", "multiwoz"):
                    out.append(("seq requests", recipe.get("seq", {}).get("llm", {})))
    return out


def check_llm_endpoint(recipe_arg, env, allow_skip):
    """When the recipe has an LLM stage and no endpoint reaches the tasks (no `base_url` in the
    recipe, no OPENAI_BASE_URL in the tasks' environment): stops the driver (exit 3) if the
    driver itself has OPENAI_BASE_URL (the operator meant the endpoint; the merge would miss
    every answer), else says loudly that the stage is skipped, as a single build would."""
    path = recipe_file(recipe_arg)
    if path is None or tomllib is None:
        loud(f"cannot read recipe {recipe_arg!r} here: the driver does not check that an LLM "
             "endpoint reaches the tasks")
        return
    with open(path, "rb") as f:
        stages = llm_tables(tomllib.load(f), path)
    if not stages:
        return
    key_vars = sorted({t.get("api_key_env", "OPENAI_API_KEY") for _, t in stages})
    seen = ray.get(task_env.remote(["OPENAI_BASE_URL", "TOOLFORGE_LLM_MODEL"] + key_vars))
    names = ", ".join(s for s, _ in stages)
    if all(not str(t.get("base_url", "")).strip() for _, t in stages) and not seen["OPENAI_BASE_URL"].strip():
        msg = (f"recipe {recipe_arg} has an LLM stage ({names}) but no endpoint reaches the tasks: "
               "no base_url in the recipe and OPENAI_BASE_URL is not in the tasks' environment")
        if os.environ.get("OPENAI_BASE_URL", "").strip() and not allow_skip:
            loud(f"ERROR: {msg}; it is set on the driver: forward it with --env OPENAI_BASE_URL "
                 "--env OPENAI_API_KEY (or --allow-llm-skip to build without the stage)")
            sys.exit(3)
        loud(f"LLM STAGE SKIPPED: {msg}; to use an endpoint, set it on the driver and add "
             "--env OPENAI_BASE_URL --env OPENAI_API_KEY")
        return
    for k in key_vars:
        if not seen[k] and os.environ.get(k):
            loud(f"{k} is set on the driver but not in the tasks' environment: "
                 f"add --env {k} if the endpoint needs a key")
    print(f"llm: the tasks reach an endpoint for {names}", flush=True)


def shard_round(task, a, env, attempts, round_no, kill_marker):
    """Runs the N shards of one round and waits for all; exits 1 naming each shard that failed
    for good, with toolforge's output (no Python traceback)."""
    refs = [
        task.remote(a.toolforge, a.recipe, a.store, i, a.shards, env,
                    kill_marker if i == 0 else None, attempts, round_no, os.getcwd())
        for i in range(a.shards)
    ]
    outputs, failed = [], []
    for i, ref in enumerate(refs):
        try:
            outputs.append(ray.get(ref))
        except ray.exceptions.RayError as e:
            cause = getattr(e, "cause", None)
            failed.append(f"shard {i}/{a.shards}: {cause if isinstance(cause, RuntimeError) else e}")
    if failed:
        loud(f"{len(failed)} shard(s) failed after {a.retries} retries (round {round_no}); "
             "the merge was not run")
        print("\n".join(failed), file=sys.stderr)
        sys.exit(1)
    return outputs


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("recipe", help="recipe name or file, as for `toolforge build`")
    p.add_argument("--shards", type=int, required=True, help="number of shard tasks N")
    p.add_argument("--store", required=True, help="shared store: s3://bucket/prefix or a directory")
    p.add_argument("--out", help="output root of the merge (default: the project's out/)")
    p.add_argument("--toolforge", default="toolforge", help="the toolforge executable on every node")
    p.add_argument("--retries", type=int, default=3, help="re-runs of a failed or lost shard")
    p.add_argument("--env", action="append", default=[], metavar="NAME",
                   help="forward the driver's variable NAME to the tasks (repeatable), "
                        "e.g. --env OPENAI_BASE_URL --env OPENAI_API_KEY")
    p.add_argument("--allow-llm-skip", action="store_true",
                   help="build an LLM recipe without its LLM stage when the driver's endpoint "
                        "is not forwarded to the tasks")
    p.add_argument("--kill-first-attempt", metavar="MARKER", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.shards < 1:
        p.error("--shards must be at least 1")
    unset = [k for k in a.env if k not in os.environ]
    if unset:
        p.error(f"--env {' '.join(unset)}: not set in the driver's environment")

    env = {k: v for k, v in os.environ.items() if k.startswith(("AWS_", "TOOLFORGE_"))}
    env.update({k: os.environ[k] for k in a.env})
    if os.environ.get("RAY_ADDRESS"):
        try:
            ray.init(runtime_env={"env_vars": env})
        except ConnectionError as e:
            loud(f"cannot connect to the Ray cluster at {os.environ['RAY_ADDRESS']}: {e} (a head "
                 "started with token authentication needs RAY_AUTH_MODE=token and its token in "
                 "~/.ray/auth_token or RAY_AUTH_TOKEN)")
            return 1
        print(f"ray: connected to {os.environ['RAY_ADDRESS']}", flush=True)
    else:
        ray.init(include_dashboard=False, runtime_env={"env_vars": env})
        nodes = ", ".join(n["NodeManagerAddress"] for n in ray.nodes() if n.get("Alive"))
        print(f"ray: started a local instance: node address {nodes}, GCS "
              f"{ray.get_runtime_context().gcs_address} (as Ray reports them; Ray listens on every "
              "interface, with token authentication)", flush=True)
    print(f"ray: tasks get {', '.join(sorted(env)) or 'no variables'} from the driver", flush=True)
    check_llm_endpoint(a.recipe, env, a.allow_llm_skip)

    attempts = Attempts.remote()
    task = shard.options(max_retries=a.retries, retry_exceptions=True)
    outputs = shard_round(task, a, env, attempts, 1, a.kill_first_attempt)
    for line in outputs:
        print(line)
    # Round two: every compile item is in the store now; each shard computes its share of the
    # later stages. A third round when a shard's trajectories waited for other shards' LLM answers.
    rounds = 1
    while rounds < 3 and any(ROUND_TWO in o for o in outputs):
        rounds += 1
        print(f"round {rounds}: the {a.shards} shards compute their share of the later stages "
              f"(LLM requests each at the recipe's requests_per_second / {a.shards})", flush=True)
        outputs = shard_round(task, a, env, attempts, rounds, None)
        for line in outputs:
            print(line)
    counts = ray.get(attempts.all.remote())
    for r in range(1, rounds + 1):
        parts = []
        for i in range(a.shards):
            n = counts.get((r, i), 0)
            parts.append(f"shard {i}/{a.shards}: {n}" + (" (retried)" if n > 1 else ""))
        retried = sum(max(counts.get((r, i), 0) - 1, 0) for i in range(a.shards))
        print(f"attempts, round {r}: {'; '.join(parts)}; {retried} retries", flush=True)
    ray.shutdown()

    merge = [a.toolforge, "build", a.recipe, "--quiet", "--store", a.store, "--merge", str(a.shards)]
    if a.out:
        merge += ["--out", a.out]
    try:
        r = subprocess.run(merge, capture_output=True, text=True, env={**os.environ, **env})
    except OSError as e:
        loud(f"the merge could not start {a.toolforge}: {e}")
        return 127
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        loud(f"the merge failed (toolforge exited {r.returncode}); its message is above")
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
