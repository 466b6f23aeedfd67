#!/usr/bin/env bash
# Installs everything qtft needs on a fresh Debian 12 machine and builds it; every step is
# skipped when already done, so rerunning costs seconds. Used by the README's two commands.
#   apt: compilers and build tools, GoogleTest, nlohmann-json, CLI11, ccache, gloo headers,
#        ONNX and protobuf (qtft export-onnx), clang-format (the test suite checks the
#        formatting), tzdata (--calendar-timezone)
#   venv: the pinned torch and pyarrow wheels (LibTorch, Arrow/Parquet C++), outside the
#         clone under ~/.cache/qtft/venv-<hash of requirements.txt>, shared by all clones
#   build: cmake --preset release, then ninja, into build/: the targets given as arguments
#          (train.sh asks for the qtft program only), or everything (tests, benchmarks)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

apt_packages=(g++ cmake ninja-build ccache libgtest-dev libgmock-dev nlohmann-json3-dev libcli11-dev libgloo-dev libonnx-dev
              libprotobuf-dev clang-format tzdata)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "qtft setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi

hash="$(sha256sum scripts/requirements.txt | cut -c1-12)"
venv="${QTFT_CACHE_DIR:-$HOME/.cache/qtft}/venv-$hash"
if [[ ! -f "$venv/.qtft-complete" ]]; then
  echo "qtft setup: creating $venv with the pinned wheels (torch is several GB; once per machine)"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet -r scripts/requirements.txt
  touch "$venv/.qtft-complete"
fi

if [[ ! -f build/build.ninja ]]; then
  cmake --preset release -DQTFT_PYTHON="$venv/bin/python"
fi
if (($# > 0)); then
  cmake --build --preset release --target "$@"
else
  cmake --build --preset release
fi
