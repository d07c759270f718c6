#!/usr/bin/env python3
"""Sharded toolforge build on a Ray cluster: N shard tasks (retried), then the merge.

Each task runs `toolforge build RECIPE --shard I/N --store STORE` on some node (writing its
stage items into the shared store); when all N have finished, the driver runs
`toolforge build RECIPE --merge N --store STORE --out OUT`, which computes nothing and writes the
dataset. The later stages (LLM requests of paraphrase, seq requests, task synthesis; the
trajectory segments of text-to-SQL recipes) need the whole compiled build: a shard says so
(`round two needed`), and the driver then runs the N shards a second time, each computing its
share. A task whose worker dies (node lost, SIGKILL) or whose toolforge fails is re-run by Ray
(`--retries`); a shard is a pure function of its inputs, so a re-run is harmless.

    python3 scripts/ray_build.py slot-bird --shards 4 --store s3://bucket/toolforge
    RAY_ADDRESS=ray://head:10001 python3 scripts/ray_build.py ...    # an existing cluster
    ray job submit -- python3 scripts/ray_build.py ...                # the same as a Ray job

Without RAY_ADDRESS a local Ray instance is started (bound to 127.0.0.1). The store must be
reachable from every node (S3 for a cluster; a directory is fine on one machine). AWS_* and
TOOLFORGE_* variables of the driver are passed to the tasks.
"""
import argparse
import os
import signal
import subprocess
import sys

import ray


def run(cmd, env):
    """Runs toolforge; raises with its output when it fails (so Ray retries the task)."""
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stdout}{r.stderr}")
    return (r.stdout + r.stderr).strip()


@ray.remote(num_cpus=1)
def shard(toolforge, recipe, store, index, count, env, kill_marker):
    """One shard; `kill_marker` (tests only) makes the first attempt SIGKILL its own worker."""
    if kill_marker and not os.path.exists(kill_marker):
        open(kill_marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    cmd = [toolforge, "build", recipe, "--quiet", "--store", store, "--shard", f"{index}/{count}"]
    return run(cmd, env)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("recipe", help="recipe name or file, as for `toolforge build`")
    p.add_argument("--shards", type=int, required=True, help="number of shard tasks N")
    p.add_argument("--store", required=True, help="shared store: s3://bucket/prefix or a directory")
    p.add_argument("--out", help="output root of the merge (default: the project's out/)")
    p.add_argument("--toolforge", default="toolforge", help="the toolforge executable on every node")
    p.add_argument("--retries", type=int, default=3, help="re-runs of a failed or lost shard")
    p.add_argument("--kill-first-attempt", metavar="MARKER", help=argparse.SUPPRESS)
    a = p.parse_args()

    env = {k: v for k, v in os.environ.items() if k.startswith(("AWS_", "TOOLFORGE_"))}
    if os.environ.get("RAY_ADDRESS"):
        ray.init(runtime_env={"env_vars": env})
    else:
        ray.init(include_dashboard=False, runtime_env={"env_vars": env}, _node_ip_address="127.0.0.1")
    task = shard.options(max_retries=a.retries, retry_exceptions=True)
    refs = [
        task.remote(a.toolforge, a.recipe, a.store, i, a.shards, env,
                    a.kill_first_attempt if i == 0 else None)
        for i in range(a.shards)
    ]
    outputs = ray.get(refs)
    for line in outputs:
        print(line)
    # Round two: every compile item is in the store now; each shard computes its share of the
    # later stages. A third round when a shard's trajectories waited for other shards' LLM answers.
    for _ in range(2):
        if not any("round two needed" in o for o in outputs):
            break
        refs = [task.remote(a.toolforge, a.recipe, a.store, i, a.shards, env, None) for i in range(a.shards)]
        outputs = ray.get(refs)
        for line in outputs:
            print(line)
    merge = [a.toolforge, "build", a.recipe, "--quiet", "--store", a.store, "--merge", str(a.shards)]
    if a.out:
        merge += ["--out", a.out]
    print(run(merge, env))
    ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
