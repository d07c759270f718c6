#!/usr/bin/env bash
# Runs a sharded toolforge build on Kubernetes (>= 1.28) and fails loudly when a shard fails:
#
#   scripts/k8s/run.sh [TIMEOUT_SECONDS]     # default 7200; kubectl's current context
#
# 1. applies shards.yaml (the Indexed Job) and polls it until Complete or Failed — unlike
#    `kubectl wait --for=condition=complete`, which waits out its whole timeout on a failed Job;
# 2. while a shard printed `round two needed` (the later stages — trajectories and variants of a
#    text-to-SQL recipe, LLM requests — need every compile item in the store), deletes the Job
#    and applies it again, at most three rounds: each shard computing its share;
# 3. applies merge.yaml and polls it the same way.
# On Failed it prints the failed pods' logs and exits 1; on a timeout it exits 124.
set -euo pipefail
cd "$(dirname "$0")"
timeout=${1:-7200}

# Polls job $1 until its Complete or Failed condition is True; exit 0 when complete.
wait_job() {
    local job=$1 start=$SECONDS state
    while :; do
        state=$(kubectl get "job/$job" -o jsonpath='{.status.conditions[?(@.status=="True")].type}')
        case " $state " in
            *" Complete "*) return 0 ;;
            *" Failed "*)
                echo "run.sh: job/$job failed:" >&2
                kubectl logs -l "job-name=$job" --tail=50 --prefix --max-log-requests=1000 >&2 || true
                return 1 ;;
        esac
        if ((SECONDS - start > timeout)); then
            echo "run.sh: job/$job neither complete nor failed after ${timeout}s" >&2
            return 124
        fi
        sleep 10
    done
}

# Runs the shard Job once (a fresh Job: the same manifest applied again).
shard_round() {
    kubectl delete job/toolforge-shards --ignore-not-found --wait=true
    kubectl apply -f shards.yaml
    wait_job toolforge-shards
}

shard_round
round=1
while [ "$round" -lt 3 ] &&
    kubectl logs -l job-name=toolforge-shards --tail=-1 --max-log-requests=1000 | grep -q "round two needed"; do
    round=$((round + 1))
    echo "run.sh: round $round of the shards (each computes its share of the later stages)"
    shard_round
done
kubectl delete job/toolforge-merge --ignore-not-found --wait=true
kubectl apply -f merge.yaml
wait_job toolforge-merge
echo "run.sh: merged into the toolforge-out volume"
