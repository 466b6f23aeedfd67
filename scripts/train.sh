#!/usr/bin/env bash
# The README's first command: set up (idempotent), then train on the embedded default data.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
exec "$root/build/qtft" train "$@"
