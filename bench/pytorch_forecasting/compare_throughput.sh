#!/usr/bin/env bash
# Opt-in: qtft's training throughput beside pytorch-forecasting's TFT in one run, on the
# same machine, threads, Parquet bars, windows, quantiles and batch size, interleaved
# (qtft, then pytorch-forecasting, per configuration and round). Not part of the tests or
# of the README's two commands.
#   bench/pytorch_forecasting/compare_throughput.sh [--rounds 2] [--steps 10] [--threads 2] [--out DIR]
#                                                  [--configs "paper small wide"] [--wide-steps 3]
# wide is configuration W (issue 35): bars from `qtft make-data --extra-inputs 213`, 200
# observed and 20 known real inputs (the derived ones and declared columns), once with each
# real input at width 16 and once at 160 (qtft's --variable-hidden-size, pytorch-forecasting's
# hidden_continuous_size).
# pytorch-forecasting goes into a scratch venv under ~/.cache/qtft (outside the clone) that
# reuses the torch and pyarrow of qtft's venv, so both tools run the same LibTorch.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
rounds=2 steps=10 threads=2 out="build/compare_throughput" configs="paper small wide" wide_steps=3
while (($#)); do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --configs) configs="$2"; shift 2 ;;
    --wide-steps) wide_steps="$2"; shift 2 ;;
    *) echo "compare_throughput.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

scripts/setup.sh qtft train_throughput_bench
cache="${QTFT_CACHE_DIR:-$HOME/.cache/qtft}"
qtft_venv="$cache/venv-$(sha256sum scripts/requirements.txt | cut -c1-12)"
pf_venv="$cache/pf-bench-venv-$(cat scripts/requirements.txt bench/pytorch_forecasting/requirements.txt | sha256sum | cut -c1-12)"
if [[ ! -f "$pf_venv/.qtft-complete" ]]; then
  echo "compare_throughput: installing pytorch-forecasting into $pf_venv"
  rm -rf "$pf_venv"
  python3 -m venv "$pf_venv"
  qtft_site="$("$qtft_venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')"
  pf_site="$("$pf_venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')"
  echo "$qtft_site" > "$pf_site/qtft-venv.pth"
  "$pf_venv/bin/pip" install --quiet -r bench/pytorch_forecasting/requirements.txt
  touch "$pf_venv/.qtft-complete"
fi

mkdir -p "$out"
bars="$out/bars.parquet"
build/qtft make-data --output "$bars"
export OMP_NUM_THREADS="$threads"
# W's columns: the 5 derived observed inputs and lead_signal, f000..f193 (200 observed); the 4
# calendar inputs and f194..f209 (20 known).
wide_bars="$out/wide_bars.parquet"
wide_observed="lead_signal,f0*,f1[0-8]*,f19[0-3]"
wide_known="f19[4-9],f20*"
if [[ " $configs " == *" wide "* ]]; then
  build/qtft make-data --output "$wide_bars" --rows 8000 --extra-inputs 213
fi
for ((r = 1; r <= rounds; ++r)); do
  for config in $configs; do
    if [[ "$config" == wide ]]; then
      for width in 16 160; do
        echo "round $r, wide$width: qtft"
        build/bench/train_throughput_bench --config wide --parquet-file "$wide_bars" --observed "$wide_observed" \
          --known "$wide_known" --variable-hidden-size "$width" --device cpu --threads "$threads" \
          --steps "$wide_steps" --json "$out/qtft_wide${width}_$r.json" | tail -n +2 | head -n 2
        echo "round $r, wide$width: pytorch-forecasting"
        "$pf_venv/bin/python" bench/pytorch_forecasting/pf_tft_throughput.py --config wide --parquet-file "$wide_bars" \
          --observed "$wide_observed" --known "$wide_known" --hidden-continuous-size "$width" \
          --threads "$threads" --steps "$wide_steps" --warmup 1 --json "$out/pf_wide${width}_$r.json" \
          2>"$out/pf_wide${width}_$r.log" || { tail -n 20 "$out/pf_wide${width}_$r.log" >&2; exit 1; }
      done
      continue
    fi
    echo "round $r, $config: qtft"
    build/bench/train_throughput_bench --config "$config" --parquet-file "$bars" --device cpu \
      --threads "$threads" --steps "$steps" --json "$out/qtft_${config}_$r.json" | tail -n +2 | head -n 2
    echo "round $r, $config: pytorch-forecasting"
    "$pf_venv/bin/python" bench/pytorch_forecasting/pf_tft_throughput.py --config "$config" --parquet-file "$bars" \
      --threads "$threads" --steps "$steps" --json "$out/pf_${config}_$r.json" 2>"$out/pf_${config}_$r.log" ||
      { tail -n 20 "$out/pf_${config}_$r.log" >&2; exit 1; }
  done
done
"$qtft_venv/bin/python" bench/pytorch_forecasting/summarize.py "$out" --rounds "$rounds" --configs "${configs/wide/wide16 wide160}"
