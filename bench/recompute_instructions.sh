#!/usr/bin/env bash
# Recompute cost by counted instructions: the W training step (bench/wide_step_bench) under
# callgrind, 1 thread, once per QAT setting and checkpoint policy, counting only inside
# qtft::train::training_step (the warm-up step and the measured one: two steps per case).
# Wall clock on shared machines cannot tell 1.3x from 1.5x and perf counters are not
# available on them; instruction counts do not move with the load. Under valgrind, MKL and
# oneDNN see no AVX-512 and take their AVX2 kernels, so the counts are those of an AVX2
# machine whatever the CPU.
#
# The cases run side by side (instruction counts do not depend on the load).
#   bench/recompute_instructions.sh [build dir] [width] [output json] [QAT settings]
# e.g. bench/recompute_instructions.sh build 16 docs/results/recompute_instructions_w16.json "off live"
set -euo pipefail
build=${1:-build}
width=${2:-16}
out=${3:-}
qats=${4:-off live}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for qat in $qats; do
  for policy in none blocks; do
    valgrind --tool=callgrind --collect-atstart=no --toggle-collect='qtft::train::training_step*' \
      --callgrind-out-file="$work/$qat-$policy.out" \
      "$build/bench/wide_step_bench" --widths "$width" --policies "$policy" --qat "$qat" --threads 1 \
      --timed-steps 0 --steps-only >"$work/$qat-$policy.log" 2>&1 &
  done
done
wait
results=()
for qat in $qats; do
  for policy in none blocks; do
    instructions=$(sed -n 's/^summary: //p' "$work/$qat-$policy.out")
    echo "width $width, QAT $qat, policy $policy: $instructions instructions in two steps"
    results+=("{\"variable_hidden_size\": $width, \"qat\": \"$qat\", \"policy\": \"$policy\", \"instructions\": $instructions}")
  done
done
json=$(printf '%s,\n' "${results[@]}")
json="{\"steps\": 2, \"threads\": 1, \"results\": [${json%,$'\n'}]}"
python3 - "$json" <<'PY'
import json, sys
r = json.loads(sys.argv[1])["results"]
for qat in dict.fromkeys(x["qat"] for x in r):
    n = {x["policy"]: x["instructions"] for x in r if x["qat"] == qat}
    print(f"QAT {qat}: blocks / none = {n['blocks'] / n['none']:.3f}")
PY
if [[ -n "$out" ]]; then printf '%s\n' "$json" >"$out.tmp" && mv "$out.tmp" "$out"; fi
