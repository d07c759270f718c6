#!/usr/bin/env bash
# Sharded toolforge build on Slurm: a job array of N shards (a second array for LLM recipes),
# then the merge, which fails loudly when a shard failed.
#
#   scripts/slurm_build.sh RECIPE N STORE [OUT]     # on a login node; submits the jobs
#
# Each array task runs `toolforge build RECIPE --shard $SLURM_ARRAY_TASK_ID/N --store STORE`
# with --mem (TOOLFORGE_SLURM_MEM, default 4G per task). A task whose toolforge fails requeues
# itself (`scontrol requeue`, up to TOOLFORGE_SLURM_RETRIES times, default 3; --requeue also
# brings it back after a node failure); its log is appended to (--open-mode=append), not
# overwritten. Later stages that read the whole compiled build need every compile item in the
# store, so such a recipe runs in rounds, each array `afterany` the one before: REST recipes and
# text-to-SQL recipes with a [variants] section two (round two: trajectories and variants, each
# shard its share), one more with an LLM stage (each shard sending its share of the requests at
# requests_per_second / N). SLOT and SEL recipes without variants take one round (a shard
# writes the trajectories of the items it compiles). TOOLFORGE_SLURM_ROUNDS overrides the
# number of rounds (default: 1, +1 for `format = "rest"` or a `[variants]` section of a
# text-to-SQL recipe, +1 with an `llm` table).
# The merge (--mem TOOLFORGE_SLURM_MERGE_MEM, default 2G; 0.8–0.9 GB RSS measured) depends
# `afterany` on the last array, so it runs even when a task failed for good (`afterok` would
# leave it pending forever): it checks the array's task states with `sacct` and exits 1 naming
# each task that did not complete, and `toolforge build --merge N` itself exits 2 naming every
# item missing from the store. STORE is s3://bucket/prefix (AWS_* exported to the jobs) or a
# directory on a shared file system. TOOLFORGE is the executable (default: toolforge on PATH;
# the same byte-identical executable on every node).
#SBATCH --job-name=toolforge
#SBATCH --cpus-per-task=2
#SBATCH --time=02:00:00
set -euo pipefail

recipe=${1:?usage: slurm_build.sh RECIPE N STORE [OUT]}
shards=${2:?number of shards N}
store=${3:?store: s3://bucket/prefix or a shared directory}
out=${4:-}
toolforge=${TOOLFORGE:-toolforge}
retries=${TOOLFORGE_SLURM_RETRIES:-3}

if [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then
    if "$toolforge" build "$recipe" --quiet --store "$store" --shard "$SLURM_ARRAY_TASK_ID/$shards"; then
        exit 0
    fi
    if [ "${SLURM_RESTART_COUNT:-0}" -lt "$retries" ]; then
        echo "slurm_build: shard $SLURM_ARRAY_TASK_ID/$shards failed; requeued (restart ${SLURM_RESTART_COUNT:-0} of $retries)" >&2
        scontrol requeue "$SLURM_JOB_ID"
    fi
    exit 1
elif [ -n "${TOOLFORGE_SLURM_MERGE:-}" ]; then
    # The last shard array's tasks: every one must have completed.
    if states=$(sacct --noheader --parsable2 --allocations --jobs "$TOOLFORGE_SLURM_MERGE" --format=JobID,State); then
        failed=$(printf '%s\n' "$states" | awk -F'|' 'NF == 2 && $2 != "COMPLETED" { print $1 " " $2 }')
        if [ -n "$failed" ]; then
            echo "slurm_build: merge not run: shard tasks of job $TOOLFORGE_SLURM_MERGE did not complete:" >&2
            echo "$failed" >&2
            exit 1
        fi
    else
        echo "slurm_build: sacct unavailable; the merge names any missing item itself" >&2
    fi
    exec "$toolforge" build "$recipe" --quiet --store "$store" --merge "$shards" ${out:+--out "$out"}
else
    recipe_file=$recipe
    [ -f "$recipe_file" ] || recipe_file="recipes/${recipe%.toml}.toml"
    rounds=${TOOLFORGE_SLURM_ROUNDS:-}
    if [ -z "$rounds" ]; then
        # REST, or text-to-SQL with variants: round two computes the later stages that read the
        # whole build (trajectories, variants); an LLM stage adds a round (its answers, then the
        # trajectories that read them). SLOT/SEL without variants: one round.
        rounds=1
        if [ -f "$recipe_file" ] && { grep -Eq '^format *= *"rest"' "$recipe_file" ||
            { grep -Eq '^format *= *"(slot|sel)"' "$recipe_file" && grep -Eq '^\[variants' "$recipe_file"; }; }; then
            rounds=2
        fi
        if [ -f "$recipe_file" ] && grep -Eq '^\[[a-z_.]*llm\]' "$recipe_file"; then rounds=$((rounds + 1)); fi
    fi
    common=(--parsable --export=ALL --requeue --open-mode=append)
    array=$(sbatch "${common[@]}" --mem="${TOOLFORGE_SLURM_MEM:-4G}" --array="0-$((shards - 1))" "$0" "$@")
    echo "submitted shards $array (array 0-$((shards - 1)), round 1)"
    for ((round = 2; round <= rounds; round++)); do
        array=$(sbatch "${common[@]}" --mem="${TOOLFORGE_SLURM_MEM:-4G}" --array="0-$((shards - 1))" \
            --dependency="afterany:$array" "$0" "$@")
        echo "submitted shards $array (array 0-$((shards - 1)), round $round: later stages)"
    done
    merge=$(sbatch "${common[@]}" --mem="${TOOLFORGE_SLURM_MERGE_MEM:-2G}" \
        --export="ALL,TOOLFORGE_SLURM_MERGE=$array" --dependency="afterany:$array" "$0" "$@")
    echo "submitted merge $merge (afterany:$array; fails naming shards that did not complete)"
fi
