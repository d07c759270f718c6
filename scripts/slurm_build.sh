#!/usr/bin/env bash
# Sharded toolforge build on Slurm: a job array of N shards, then the merge (afterok).
#
#   scripts/slurm_build.sh RECIPE N STORE [OUT]     # on a login node; submits both jobs
#
# Each array task runs `toolforge build RECIPE --shard $SLURM_ARRAY_TASK_ID/N --store STORE`;
# the merge job runs `toolforge build RECIPE --merge N --store STORE [--out OUT]` once every task
# succeeded. A failed task is re-run with `sbatch --array=I` (or `scontrol requeue`); the merge
# names any item still missing. STORE is s3://bucket/prefix (AWS_* exported to the jobs) or a
# directory on a shared file system. TOOLFORGE is the executable (default: toolforge on PATH).
#SBATCH --job-name=toolforge
#SBATCH --cpus-per-task=2
#SBATCH --time=02:00:00
set -euo pipefail

recipe=${1:?usage: slurm_build.sh RECIPE N STORE [OUT]}
shards=${2:?number of shards N}
store=${3:?store: s3://bucket/prefix or a shared directory}
out=${4:-}
toolforge=${TOOLFORGE:-toolforge}

if [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then
    exec "$toolforge" build "$recipe" --quiet --store "$store" --shard "$SLURM_ARRAY_TASK_ID/$shards"
elif [ -n "${TOOLFORGE_SLURM_MERGE:-}" ]; then
    exec "$toolforge" build "$recipe" --quiet --store "$store" --merge "$shards" ${out:+--out "$out"}
else
    array=$(sbatch --parsable --export=ALL --array="0-$((shards - 1))" "$0" "$@")
    merge=$(sbatch --parsable --export=ALL,TOOLFORGE_SLURM_MERGE=1 --dependency="afterok:$array" "$0" "$@")
    echo "submitted shards $array (array 0-$((shards - 1))) and merge $merge"
fi
