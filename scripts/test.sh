#!/usr/bin/env bash
# The README's second command: set up (idempotent), then run the whole test suite.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
ctest --preset release -j "$(nproc)" "$@"
