#!/usr/bin/env bash
# One node's acceptance results into OUT/<node>/: doctor.json, bench.json and burnin.json, the folder layout
# `gpuwise fleet report OUT` reads. collect-fleet.sbatch runs it on every node with srun.
#
# Environment: GPUWISE (default gpuwise), GPUWISE_DOCTOR_ARGS, GPUWISE_BENCH_ARGS (e.g. "--quick"),
# GPUWISE_BURNIN_MINUTES (default 10; 0 skips the burn-in), NODE (default: hostname -s).
set -uo pipefail
out="${1:?usage: collect-node.sh OUT}"
gpuwise="${GPUWISE:-gpuwise}"
node="${NODE:-$(hostname -s)}"
minutes="${GPUWISE_BURNIN_MINUTES:-10}"
dir="$out/$node"
mkdir -p "$dir"
# Each result is written whole or not at all (a failing bench still writes its JSON; exit 1 only means WARN/FAIL).
# shellcheck disable=SC2086
$gpuwise doctor --json ${GPUWISE_DOCTOR_ARGS:-} > "$dir/doctor.json.tmp"; mv -f "$dir/doctor.json.tmp" "$dir/doctor.json"
# shellcheck disable=SC2086
$gpuwise bench --json ${GPUWISE_BENCH_ARGS:-} > "$dir/bench.json.tmp"; mv -f "$dir/bench.json.tmp" "$dir/bench.json"
if [ "$minutes" != "0" ]; then
  $gpuwise burn-in --minutes "$minutes" --json > "$dir/burnin.json.tmp"; mv -f "$dir/burnin.json.tmp" "$dir/burnin.json"
fi
echo "$node: results in $dir"
