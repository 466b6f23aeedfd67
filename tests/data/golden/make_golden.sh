#!/usr/bin/env bash
# Writes the golden files of tests/cli/saved_models_cli_test.cpp with a qtft binary built from
# the tree before declared inputs (3f2c661):
#   git worktree add /tmp/old 3f2c661 && (cd /tmp/old && cmake --preset release
#     -DQTFT_PYTHON=... && cmake --build --preset release --target qtft)
#   tests/data/golden/make_golden.sh /tmp/old/build/qtft
# and records the CPU it ran on (made_on.txt): the test expects equal bits on that CPU only.
set -euo pipefail
qtft="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
model=(--hidden-size 8 --attention-heads 2 --encoder-length 16 --horizon 4 --epochs 1 --max-batches-per-epoch 3
       --batch-size 16 --threads 1 --seed 7)
"$qtft" make-data --output "$work/bars.csv" --rows 600 --symbols 2 >/dev/null
for kind in fp32 qat; do
  extra=()
  [[ $kind == qat ]] && extra=(--use-qat --qat-calibration-batches 2)
  "$qtft" train --csv-file "$work/bars.csv" "${model[@]}" "${extra[@]}" \
    --save-model "$here/defaults_3f2c661_$kind.safetensors" >/dev/null
  "$qtft" forecast --load-model "$here/defaults_3f2c661_$kind.safetensors" --csv-file "$work/bars.csv" --json \
    >"$here/defaults_3f2c661_$kind.forecast.json"
done
# The CPU's identity as tests/cli/saved_models_cli_test.cpp reads it from /proc/cpuinfo.
awk -F': ' '/^vendor_id/ && !v {v=$2} /^cpu family/ && !f {f=$2} /^model\t/ && !m {m=$2}
  /^flags/ && !g {g=$2} END {n=split(g, a, " "); s=v " " f " " m;
  for (i=1;i<=n;i++) if (a[i] ~ /^(avx2|avx512f|avx512_vnni|avx512_bf16|amx_tile)$/) s=s " " a[i]; print s}' \
  /proc/cpuinfo >"$here/made_on.txt"
