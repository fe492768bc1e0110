#!/usr/bin/env bash
# Drain a Slurm node whose GPUs fail `gpuwise doctor`. Use it as slurm.conf's HealthCheckProgram (it drains the
# node itself with scontrol and exits 0), or as a Prolog with --prolog (it exits 1 on a failure, and Slurm drains
# a node whose prolog fails). A WARN (a PCIe replay, say) is logged, not drained.
#
#   HealthCheckProgram=/usr/local/sbin/gpuwise-healthcheck.sh
#   HealthCheckInterval=300
#
# Environment: GPUWISE (the gpuwise command, default gpuwise), GPUWISE_DOCTOR_ARGS (extra doctor arguments, e.g.
# "--from snapshot.json" to replay a recorded machine), SCONTROL (default scontrol), GPUWISE_STATE (where the last
# report is kept, default /var/lib/gpuwise), NODE (default: hostname -s).
set -uo pipefail

mode="healthcheck"
[ "${1:-}" = "--prolog" ] && mode="prolog"
gpuwise="${GPUWISE:-gpuwise}"
scontrol="${SCONTROL:-scontrol}"
state="${GPUWISE_STATE:-/var/lib/gpuwise}"
node="${NODE:-$(hostname -s)}"
mkdir -p "$state"
report="$state/doctor.json"

# shellcheck disable=SC2086  # GPUWISE_DOCTOR_ARGS is a list of arguments
$gpuwise doctor --json ${GPUWISE_DOCTOR_ARGS:-} > "$report.tmp"
code=$?
mv -f "$report.tmp" "$report"
if [ "$code" -eq 3 ]; then
  failed="no GPU or driver readable"
elif [ "$code" -eq 0 ]; then
  failed=""
else  # exit 1: some check warns or fails; drain only on FAIL
  failed=$(python3 - "$report" <<'PY'
import json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    report = json.load(f)
bad = [f"{c['id']}" + ("" if c.get("gpu") is None else f"[gpu {c['gpu']}]")
       for c in report.get("checks", []) if c.get("status") == "FAIL"]
print(", ".join(bad)[:200])
PY
)
fi

if [ -z "$failed" ]; then
  exit 0
fi
reason="gpuwise doctor: $failed"
if [ "$mode" = "prolog" ]; then
  echo "$reason" >&2
  exit 1
fi
"$scontrol" update NodeName="$node" State=DRAIN Reason="$reason"
echo "drained $node: $reason" >&2
exit 0
