#!/usr/bin/env bash
# The README's second command: set up (idempotent), then run the whole test suite.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The report's test renders a page in a headless browser: Debian's chromium, for the tests only.
if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
  echo "qtft test: installing Debian's chromium (the report's rendering test)"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq chromium
fi
"$root/scripts/setup.sh"
cd "$root"
ctest --preset release -j "$(nproc)" "$@"
