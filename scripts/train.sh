#!/usr/bin/env bash
# The README's first command: set up (idempotent), then train on the embedded default data.
# Without arguments it runs the demo configuration below (about 3 minutes on 2 cores); with
# arguments, they go to `qtft train` as they are.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Only the program is built here: the tests and benchmarks are test.sh's to build.
"$root/scripts/setup.sh" qtft_cli
if (($# == 0)); then
  set -- --epochs 3 --hidden-size 32 \
    --save-model "$root/build/qtft-demo.safetensors" --metrics-json "$root/build/qtft-demo-metrics.json"
fi
exec "$root/build/qtft" train "$@"
