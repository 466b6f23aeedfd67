#!/usr/bin/env bash
# Writes the golden files of the declared-input models in tests/cli/saved_models_cli_test.cpp
# with a qtft binary built from the tree that carried them (b7a7acb, before the input schema):
#   tests/data/golden/make_golden_declared.sh build/qtft
# Each model reads declared real and categorical columns of every kind, a calendar in a time
# zone and per-series scaling, so that a change to how inputs are described must still read
# them. declared_recent.csv holds each series' last 40 bars and the 4 future rows that the
# declared known column needs; the forecasts of it are the golden outputs. The CPU is the one
# in made_on.txt (make_golden.sh): equal bits are promised there only.
set -euo pipefail
qtft="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
"$qtft" make-data --output "$work/full.csv" --rows 616 --symbols 2 --extra-inputs 5 >/dev/null
# Columns: timestamp,symbol,open,high,low,close,volume,lead_signal,f00,f01,event_flag,vol_class.
# Bars 1-300 of each symbol train; bars 261-300 and the known columns of bars 301-304 forecast.
awk -F, -v train="$work/train.csv" -v recent="$here/declared_recent.csv" '
  NR == 1 { print > train; print > recent; next }
  { k = ++seen[$2] }
  k <= 300 { print > train }
  k > 260 && k <= 300 { print > recent }
  k > 300 && k <= 304 { print $1 "," $2 ",,,,,,,,," $11 "," $12 > recent }' "$work/full.csv"
model=(--hidden-size 8 --attention-heads 2 --encoder-length 16 --horizon 4 --epochs 1 --max-batches-per-epoch 3
       --batch-size 16 --threads 1 --seed 7 --observed lead_signal,f00 --known-categorical event_flag
       --static-categorical vol_class --calendar-timezone America/Chicago --normalize per-series)
for kind in fp32 qat; do
  extra=()
  # The QAT model also forecasts a column of its own, whose past is the observed input 'target'.
  [[ $kind == qat ]] && extra=(--use-qat --qat-calibration-batches 2 --target-column f01 --target-transform none)
  "$qtft" train --csv-file "$work/train.csv" "${model[@]}" "${extra[@]}" \
    --save-model "$here/declared_b7a7acb_$kind.safetensors" >/dev/null
  "$qtft" forecast --load-model "$here/declared_b7a7acb_$kind.safetensors" --csv-file "$here/declared_recent.csv" \
    --json >"$here/declared_b7a7acb_$kind.forecast.json"
done
