#!/usr/bin/env bash
# Builds and checks qtft on a lent GPU machine that has no network and none of our Debian
# development packages, in one prepared run that fits a few minutes of device time.
#
#   scripts/gpu-check.sh --pack [DIR]   here (Debian 12, network): gathers what the build needs
#                                       that the GPU machine lacks into DIR (default .gpu-pack/,
#                                       git-ignored, to travel as a carried path); idempotent
#   scripts/gpu-check.sh --run OUT      there: builds into build-gpu/ against the pack and that
#                                       machine's own python3/torch/pyarrow, runs `ctest -L cuda`,
#                                       the whole suite and the measurements, with a timeout per
#                                       phase; logs, JSON and OUT/summary.json go to OUT
#
# Without a GPU, --run does the same on the CPU (a dry run): the cuda-labelled tests skip.
#
# Environment (all optional):
#   QTFT_GPU_PACK      the pack (default <repo>/.gpu-pack)
#   QTFT_GPU_PYTHON    the Python whose torch and pyarrow wheels to build against
#                      (default: python3 on PATH)
#   QTFT_GPU_BUDGET_S  seconds the whole --run may take (default 450: 8 minutes, less a margin
#                      for the machine's start and the transfer of OUT); each phase's cap grows
#                      with it (a dry run on 2 cores: 4500)
#   QTFT_GPU_DEVICE    cpu or cuda, to override what torch reports
#   QTFT_GPU_JOBS      parallel jobs for ninja and ctest (default: nproc)
#   QTFT_GPU_BUILD_DIR the build folder (default <repo>/build-gpu; GoogleTest is compiled
#                      beside it, in <it>-gtest)
#   QTFT_GPU_CMAKE_ARGS more arguments for the configure step, split on spaces
#   QTFT_GPU_STOP_AFTER configure: stop once configured (to check the pack on a machine that
#                      should not build)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"
  exit "${1:-2}"
}

# ----------------------------------------------------------------------------------------
# --pack
# ----------------------------------------------------------------------------------------

# Header-only or source packages: GoogleTest (headers, Debian's static libraries and its
# sources, which --run compiles with that machine's compiler), nlohmann-json, CLI11 and
# gloo's headers (the torch wheel links gloo but ships no headers). clang-format-14 is left
# out: with libclang-cpp14 and libllvm14 it is 165 MB unpacked (33 MB of .debs), far past
# what a carried path may hold; --run skips Format.ClangFormatClean instead (it checks the
# source text, the same here and there).
# ONNX and protobuf (qtft export-onnx) come with their shared libraries, which the built
# programs load from the pack (LD_LIBRARY_PATH in --run).
pack_packages=(googletest libgtest-dev libgmock-dev nlohmann-json3-dev libcli11-dev libgloo-dev
               libonnx-dev libonnx1 libprotobuf-dev libprotobuf32 libprotobuf-lite32)
# Bump when the pack's layout changes, so that an older pack is rebuilt.
pack_format=2

candidate_version() {
  apt-cache show --no-all-versions "$1" 2>/dev/null | sed -n 's/^Version: //p' | head -n1
}

pack() {
  local dir="$1"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  local sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)

  # The versions apt would fetch now decide whether the pack is up to date.
  local versions=() p v
  for p in "${pack_packages[@]}"; do
    v="$(candidate_version "$p")"
    if [[ -z "$v" ]]; then
      # A fresh machine has no package lists yet.
      "${sudo_cmd[@]}" apt-get update -qq
      v="$(candidate_version "$p")"
    fi
    [[ -n "$v" ]] || { echo "gpu-check: apt knows no package $p" >&2; exit 1; }
    versions+=("$p=$v")
  done

  # safetensors for the SafetensorsPython tests: its wheel is abi3 (one build for every
  # CPython >= 3.8), so the copy in the pinned venv imports in the GPU machine's python3.
  local venv
  venv="${QTFT_CACHE_DIR:-$HOME/.cache/qtft}/venv-$(sha256sum "$root/scripts/requirements.txt" | cut -c1-12)"
  local site=""
  if [[ -f "$venv/.qtft-complete" ]]; then
    site="$("$venv/bin/python" -c 'import os, safetensors; print(os.path.dirname(os.path.dirname(safetensors.__file__)))' 2>/dev/null || true)"
  fi
  local st_version=""
  if [[ -n "$site" ]] && compgen -G "$site/safetensors/*.abi3.so" >/dev/null; then
    st_version="$(sed -n 's/^safetensors==//p' "$root/scripts/requirements.txt")"
  else
    echo "gpu-check: warning: no abi3 safetensors in $venv (run scripts/setup.sh); packing none," \
         "so the SafetensorsPython tests need the GPU machine's own" >&2
  fi

  local stamp
  stamp="format=$pack_format ${versions[*]} safetensors=${st_version:-none}"
  if [[ -f "$dir/.pack-stamp" && "$(cat "$dir/.pack-stamp")" == "$stamp" ]]; then
    echo "gpu-check: $dir is up to date ($(du -sh "$dir" | cut -f1))"
    return 0
  fi

  # Rebuild from scratch: leftovers of other versions must not shadow the new ones.
  find "$dir" -mindepth 1 -delete
  local tmp
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' RETURN
  # apt-get download fetches as the _apt user when run as root; it must be able to write here.
  chmod 777 "$tmp"
  (cd "$tmp" && apt-get download -qq "${versions[@]}")
  local deb
  for deb in "$tmp"/*.deb; do
    dpkg -x "$deb" "$dir"
  done
  # Documentation is not needed, and links may not survive the transfer: the two there are
  # usr/src/gtest (an alias of usr/src/googletest/googletest) and usr/lib/libgloo.so (to
  # libgloo0, not packed: nothing links gloo).
  rm -rf "$dir/usr/share/doc" "$dir/usr/share/lintian"
  find "$dir" -type l -delete
  if [[ -n "$st_version" ]]; then
    mkdir -p "$dir/python"
    cp -a "$site/safetensors" "$site/safetensors-$st_version.dist-info" "$dir/python/"
    find "$dir/python" -name __pycache__ -prune -exec rm -rf {} +
  fi
  printf '%s\n' "${versions[@]}" "safetensors=${st_version:-none}" >"$dir/MANIFEST.txt"
  echo "$stamp" >"$dir/.pack-stamp"
  echo "gpu-check: packed into $dir: ${versions[*]} safetensors=${st_version:-none}"
  echo "gpu-check: pack size $(du -sh "$dir" | cut -f1) ($(du -sb "$dir" | cut -f1) bytes)"
}

# ----------------------------------------------------------------------------------------
# --run
# ----------------------------------------------------------------------------------------

now() { date +%s.%N; }

# Appends one phase's record (tab-separated) and rewrites OUT/summary.json, so that a run
# cut off from outside still leaves a summary of the phases it finished.
record() {  # record NAME STATUS RC START END TIMEOUT_S NOTE
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$out/.phases.tsv"
  # A phase the budget left no time for counts as failed: the run did not do it.
  [[ "$2" == ok || "$2" == skipped ]] || failures=$((failures + 1))
  write_summary || true
}

# phase [--stdout FILE] NAME CAP_S RESERVE_S CMD...: runs CMD under `timeout`, for CAP_S
# seconds at most and never into the last RESERVE_S seconds of the budget (kept for the
# phases after it), output to OUT/NAME.log (stdout to FILE when given). A phase that gets
# under 5 seconds is recorded as skipped. Returns CMD's status (124: timed out).
phase() {
  local stdout=""
  if [[ "$1" == --stdout ]]; then stdout="$2"; shift 2; fi
  local name="$1" cap="$2" reserve="$3"; shift 3
  # The caps are sized for the 8-minute budget on 16 cores; a larger budget (a dry run on a
  # small machine) stretches them in proportion.
  cap=$((cap * cap_scale))
  local left=$((deadline - $(date +%s) - reserve))
  local limit=$((cap < left ? cap : left))
  local start end rc=0 status
  start="$(now)"
  if ((left < 5)); then
    echo "gpu-check: $name skipped: the budget is spent"
    record "$name" skipped-no-time "" "$start" "$start" 0 "budget spent"
    return 124
  fi
  echo "gpu-check: $name (up to ${limit}s) ..."
  # timeout signals the whole process group it starts, so ninja's and ctest's children stop too.
  if [[ -n "$stdout" ]]; then
    timeout -k 10 "$limit" "$@" >"$stdout" 2>"$out/$name.log" || rc=$?
  else
    timeout -k 10 "$limit" "$@" >"$out/$name.log" 2>&1 || rc=$?
  fi
  end="$(now)"
  case "$rc" in
    0) status=ok ;;
    124 | 137) status=timed-out ;;
    *) status=failed ;;
  esac
  echo "gpu-check: $name $status (rc $rc, $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}')s)"
  record "$name" "$status" "$rc" "$start" "$end" "$limit" ""
  return "$rc"
}

skip() {  # skip NAME REASON
  echo "gpu-check: $1 skipped: $2"
  record "$1" skipped "" "$(now)" "$(now)" 0 "$2"
}

write_summary() {
  "$py" - "$out" "$budget" "$script_start" "$device" "$excluded_json" <<'EOF'
import csv, json, os, sys, time
import xml.etree.ElementTree as ET
out, budget, start, device, excluded = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
phases = []
with open(os.path.join(out, ".phases.tsv")) as f:
    for name, status, rc, t0, t1, limit, note in csv.reader(f, delimiter="\t"):
        phases.append({"name": name, "status": status, "rc": int(rc) if rc else None,
                       "seconds": round(float(t1) - float(t0), 1), "timeout_s": int(limit),
                       **({"log": name + ".log"} if os.path.exists(os.path.join(out, name + ".log")) else {}),
                       **({"note": note} if note else {})})
def junit(path):
    # ctest's JUnit file: counts, and the names of the tests that failed.
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    failed = [c.get("name") for c in root.iter("testcase")
              if c.find("failure") is not None or c.find("error") is not None]
    return {"tests": int(root.get("tests", 0)), "failures": int(root.get("failures", 0)),
            "skipped": int(root.get("skipped", 0)), "seconds": float(root.get("time", 0)),
            "failed": failed}
env = {}
try:
    env = json.load(open(os.path.join(out, "env.json")))
except (OSError, ValueError):
    pass
summary = {
    "ok": all(p["status"] in ("ok", "skipped") for p in phases),
    "device": device, "budget_s": budget, "elapsed_s": round(time.time() - start, 1),
    "gpu": env.get("gpu"), "driver": env.get("driver"), "torch": env.get("torch"),
    "torch_cuda": env.get("torch_cuda"), "pyarrow": env.get("pyarrow"),
    "phases": phases, "excluded_tests": json.loads(excluded),
    "ctest": {k: junit(os.path.join(out, f"ctest-{k}.xml")) for k in ("cuda", "all")},
}
with open(os.path.join(out, "summary.json.tmp"), "w") as f:
    json.dump(summary, f, indent=2)
os.replace(os.path.join(out, "summary.json.tmp"), os.path.join(out, "summary.json"))
EOF
}

# What the machine has: GPU, driver, torch (and whether it sees CUDA), pyarrow, the Python
# modules the tests use, tools. Written to OUT/env.json and OUT/machine.txt. Exported, for
# `timeout bash -c`.
probe_env() {
  set -euo pipefail
  {
    echo "== nvidia-smi"
    timeout 30 nvidia-smi 2>&1 || echo "(no nvidia-smi or no GPU)"
    echo "== tools"
    cmake --version | head -n1; ninja --version; "${CXX:-g++}" --version | head -n1
    echo "nproc $(nproc)"; uname -a
  } >"$out/machine.txt" 2>&1 || true
  local smi=""
  if command -v nvidia-smi >/dev/null; then
    smi="$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n1 || true)"
  fi
  SMI="$smi" PACK_PY="$pack/python" timeout 60 "$py" - >"$out/env.json" <<'EOF'
import importlib, json, os, subprocess, sys
env = {"python": sys.executable, "python_version": sys.version.split()[0]}
smi = [s.strip() for s in os.environ.get("SMI", "").split(",")]
env["gpu"], env["driver"], env["gpu_memory"] = (smi + [None, None, None])[:3] if smi[0] else (None, None, None)
try:
    import torch
    env["torch"] = torch.__version__
    env["torch_cuda"] = torch.version.cuda
    env["cuda_available"] = torch.cuda.is_available()
    if env["cuda_available"]:
        env["torch_gpu"] = torch.cuda.get_device_name(0)
        env["torch_gpu_capability"] = list(torch.cuda.get_device_capability(0))
except Exception as e:
    env["torch_error"] = repr(e)
    env["cuda_available"] = False
for mod in ("pyarrow", "numpy", "safetensors"):
    try:
        env[mod] = importlib.import_module(mod).__version__
    except Exception:
        env[mod] = None
# Whether the packed safetensors would import here (added to PYTHONPATH when needed).
if env["safetensors"] is None and os.path.isdir(os.environ["PACK_PY"]):
    r = subprocess.run([sys.executable, "-c", "import safetensors; print(safetensors.__version__)"],
                       env={**os.environ, "PYTHONPATH": os.environ["PACK_PY"]}, capture_output=True, text=True)
    env["safetensors_from_pack"] = r.stdout.strip() or None
env["zoneinfo"] = os.path.exists("/usr/share/zoneinfo/America/Chicago")
env["chromium"] = any(os.access(os.path.join(d, "chromium"), os.X_OK) for d in os.environ["PATH"].split(":"))
json.dump(env, sys.stdout, indent=2)
EOF
}

# Compiles the packed GoogleTest sources with this machine's compiler: Debian's prebuilt
# static libraries were compiled by g++ 12 against its libstdc++, which an older toolchain
# there could not link. Exported so that `timeout bash -c` can run it.
build_gtest() {
  set -euo pipefail
  cmake -S "$pack/usr/src/googletest" -B "$gtest_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$gtest_prefix" -DBUILD_GMOCK=ON -DINSTALL_GTEST=ON \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5
  cmake --build "$gtest_build" -j "$jobs"
  cmake --install "$gtest_build"
  touch "$gtest_prefix/.complete"
}

# ============================ measure(): issue 49's figures ============================
# Each line is one phase: `phase [--stdout FILE] NAME CAP_S RESERVE_S COMMAND...`; its log is
# OUT/NAME.log, its timing and status land in OUT/summary.json. $device is cuda or cpu,
# $qtft the CLI, $bench the benchmarks' folder, $out the output folder. On the CPU (a dry
# run) the wide configuration would take minutes a step: only the small figures run there.
measure() {
  local w="$build/gpu-check-w.parquet" limit=()
  # Configuration W (issue 35): 200 observed + 20 known inputs, hidden 160, encoder 168,
  # horizon 24, batch 32.
  local w_flags=(--parquet-file "$w" --observed 'f0*,f1[0-8]*' --known 'f19*,f20*' --encoder-length 168
    --horizon 24 --hidden-size 160 --variable-hidden-size 160 --batch-size 32)
  [[ "$device" == cuda ]] && limit=(--gpu-memory-limit 4GiB)
  if [[ "$device" == cuda ]]; then
    phase measure-make-w 60 0 "$qtft" make-data --output "$w" --rows 8000 --symbols 2 --extra-inputs 223 || true
    # The design note's card: QAT live with checkpointing under 4 GiB (without it the step
    # is expected to run out, and the report says so).
    phase --stdout "$out/memory-w-qat-4gib.json" measure-memory-w-qat-4gib 90 0 \
      "$qtft" memory-report --device cuda --deterministic "${limit[@]}" "${w_flags[@]}" --use-qat \
      --checkpoint-policy blocks --timed-steps 5 --json || true
    # Step times on the whole card: checkpointed / plain and QAT live / FP32.
    phase --stdout "$out/memory-w-fp32.json" measure-memory-w-fp32 60 0 \
      "$qtft" memory-report --device cuda "${w_flags[@]}" --checkpoint-policy blocks --timed-steps 5 --json || true
    phase --stdout "$out/memory-w-qat.json" measure-memory-w-qat 60 0 \
      "$qtft" memory-report --device cuda "${w_flags[@]}" --use-qat --checkpoint-policy blocks --timed-steps 5 \
      --json || true
    # The same two in bf16 (--precision bf16, CUDA's autocast), beside them.
    phase --stdout "$out/memory-w-fp32-bf16.json" measure-memory-w-fp32-bf16 60 0 \
      "$qtft" memory-report --device cuda "${w_flags[@]}" --precision bf16 --checkpoint-policy blocks \
      --timed-steps 5 --json || true
    phase --stdout "$out/memory-w-qat-bf16.json" measure-memory-w-qat-bf16 60 0 \
      "$qtft" memory-report --device cuda "${w_flags[@]}" --use-qat --precision bf16 --checkpoint-policy blocks \
      --timed-steps 5 --json || true
    # 50 steps of W, QAT live and checkpointed, under the 4 GiB limit: it must not run out.
    phase measure-train-w-4gib 120 0 \
      "$qtft" train --device cuda "${limit[@]}" "${w_flags[@]}" --use-qat --use-gradient-checkpointing \
      --epochs 1 --max-batches-per-epoch 50 --metrics-json "$out/train-w-4gib-metrics.json" || true
    # NVIDIA's TFT's configuration, for its published A100 items/s.
    if [[ -x "$bench/train_throughput_bench" ]]; then
      phase measure-throughput-nvidia 60 0 \
        "$bench/train_throughput_bench" --steps 3 --device cuda --config nvidia-electricity \
        --json "$out/throughput-nvidia-electricity.json" || true
    fi
  fi
  # The demo model (README's first command): its validation loss against the CPU's seed spread.
  phase measure-train-demo 120 0 \
    "$qtft" train --device "$device" --epochs 3 --hidden-size 32 --metrics-json "$out/train-demo-metrics.json" \
    --save-model "$build/gpu-check-demo.safetensors" || true
  if [[ -x "$bench/train_throughput_bench" ]]; then
    phase measure-train-throughput 90 0 \
      "$bench/train_throughput_bench" --steps 10 --device "$device" --config both \
      $([[ "$device" == cuda ]] && echo --precision both) \
      --json "$out/train-throughput.json" || true
  else
    skip measure-train-throughput "$bench/train_throughput_bench was not built"
  fi
}
# ==========================================================================================

run() {
  out="$1"
  mkdir -p "$out"
  out="$(cd "$out" && pwd)"
  script_start="$(now)"
  budget="${QTFT_GPU_BUDGET_S:-450}"
  cap_scale=$(((budget + 449) / 450))
  deadline=$(($(date +%s) + budget))
  jobs="${QTFT_GPU_JOBS:-$(nproc)}"
  pack="${QTFT_GPU_PACK:-$root/.gpu-pack}"
  build="${QTFT_GPU_BUILD_DIR:-$root/build-gpu}"
  gtest_build="$build-gtest"
  gtest_prefix="$gtest_build/install"
  qtft="$build/qtft"
  bench="$build/bench"
  device=unknown
  excluded_json="[]"
  failures=0
  : >"$out/.phases.tsv"
  export pack gtest_build gtest_prefix jobs
  export -f build_gtest

  py="${QTFT_GPU_PYTHON:-$(command -v python3 || true)}"
  [[ -n "$py" && -x "$py" ]] || { echo "gpu-check: no python3 (set QTFT_GPU_PYTHON)" >&2; exit 1; }
  [[ -f "$pack/.pack-stamp" ]] || {
    echo "gpu-check: no pack at $pack: run scripts/gpu-check.sh --pack here first and carry it" >&2
    exit 1
  }
  echo "gpu-check: python $py, pack $pack, $jobs jobs, budget ${budget}s, output $out"

  export out py pack
  export -f probe_env
  phase env 90 0 bash -c probe_env || true
  # cuda when torch there sees a GPU (that is what LibTorch in qtft will see too); nvidia-smi
  # alone seeing one (e.g. a driver too old for the wheel's CUDA) is noted, not trusted.
  local cuda smi_gpu
  cuda="$("$py" -c 'import json,sys; print(int(bool(json.load(open(sys.argv[1])).get("cuda_available"))))' "$out/env.json" 2>/dev/null || echo 0)"
  smi_gpu="$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1])).get("gpu") or "")' "$out/env.json" 2>/dev/null || true)"
  device="${QTFT_GPU_DEVICE:-$([[ "$cuda" == 1 ]] && echo cuda || echo cpu)}"
  if [[ "$cuda" != 1 && -n "$smi_gpu" ]]; then
    echo "gpu-check: warning: nvidia-smi sees $smi_gpu but torch does not; measuring on $device"
  fi
  echo "gpu-check: device $device"

  # The packed safetensors, only where the machine's python has none of its own.
  if ! "$py" -c 'import safetensors' 2>/dev/null && [[ -d "$pack/python" ]]; then
    export PYTHONPATH="$pack/python${PYTHONPATH:+:$PYTHONPATH}"
  fi

  # GoogleTest: compiled from the packed sources; Debian's prebuilt libraries if that fails.
  local gtest_dir=""
  if [[ -f "$gtest_prefix/.complete" ]]; then
    skip gtest "compiled by an earlier run"
  else
    phase gtest 120 0 bash -c build_gtest || true
  fi
  if [[ -f "$gtest_prefix/.complete" ]]; then
    gtest_dir="$(dirname "$(find "$gtest_prefix" -name GTestConfig.cmake | head -n1)")"
  else
    gtest_dir="$(dirname "$(find "$pack/usr/lib" -name GTestConfig.cmake | head -n1)")"
    echo "gpu-check: warning: using Debian's prebuilt GoogleTest from the pack"
  fi

  # Every package the project looks for is named by its config folder in the pack, and the
  # pack is on CMAKE_PREFIX_PATH (cache and environment: the package test's nested cmake
  # finds nlohmann_json through the environment's).
  local prefix_path="$gtest_prefix;$pack/usr"
  export CMAKE_PREFIX_PATH="$gtest_prefix:$pack/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  # The pack's shared libraries (ONNX, protobuf) for the programs built against them.
  export LD_LIBRARY_PATH="$pack/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local configure=(cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
    -DQTFT_PYTHON="$py" -DCMAKE_PREFIX_PATH="$prefix_path"
    -DGTest_DIR="$gtest_dir"
    -Dnlohmann_json_DIR="$pack/usr/share/cmake/nlohmann_json"
    -DCLI11_DIR="$pack/usr/share/cmake/CLI11"
    -DQTFT_GLOO_INCLUDE_DIR="$pack/usr/include")
  if [[ -n "${QTFT_GPU_CMAKE_ARGS:-}" ]]; then
    # shellcheck disable=SC2206 # split on spaces, as documented
    configure+=(${QTFT_GPU_CMAKE_ARGS})
  fi
  if ! phase configure 120 0 "${configure[@]}"; then
    # Without a build tree nothing else can run; the summary says where it stopped.
    write_summary || true
    echo "gpu-check: configure failed: see $out/configure.log" >&2
    exit 1
  fi
  cp "$build/CMakeCache.txt" "$out/CMakeCache.txt"
  if [[ "${QTFT_GPU_STOP_AFTER:-}" == configure ]]; then
    write_summary || true
    echo "gpu-check: configured $build (QTFT_GPU_STOP_AFTER=configure); $out/summary.json"
    ((failures == 0))
    return
  fi

  # The CLI first, so that the measurements can run even if the rest of the build does not
  # finish in time; then everything (tests, benchmarks).
  phase build-cli 300 60 cmake --build "$build" -j "$jobs" --target qtft_cli || true
  local built_all=0
  if phase build-all 300 90 cmake --build "$build" -j "$jobs"; then built_all=1; fi

  # Tests this machine cannot run, with the reason, kept out of the whole suite's run.
  local exclude=() reasons=()
  local cf
  cf="$(sed -n 's/^QTFT_CLANG_FORMAT:FILEPATH=//p' "$build/CMakeCache.txt")"
  if [[ -z "$cf" || "$cf" == *NOTFOUND || "$("$cf" --version 2>/dev/null)" != *" 14."* ]]; then
    exclude+=('^Format\.ClangFormatClean$'); reasons+=("no clang-format 14 (the source text is checked where it is)")
  fi
  if ! command -v chromium >/dev/null; then
    exclude+=('RenderInABrowser$'); reasons+=("no chromium (the report's rendering test)")
  fi
  if ! "$py" -c 'import onnxruntime' 2>/dev/null; then
    exclude+=('^OnnxExportCli\.|^bench_smoke\.onnx_(latency|agreement)$')
    reasons+=("no onnxruntime in $py (the ONNX export's checks run it)")
  fi
  local exclude_re=""
  if ((${#exclude[@]})); then exclude_re="$(IFS='|'; echo "${exclude[*]}")"; fi
  excluded_json="$("$py" -c 'import json,sys; a=sys.argv[1:]; n=len(a)//2; print(json.dumps([{"regex": r, "why": w} for r, w in zip(a[:n], a[n:])]))' "${exclude[@]}" "${reasons[@]}")"

  local ctest=(ctest --test-dir "$build" --output-on-failure --timeout 180 -j "$jobs")
  if ((built_all)); then
    # The GPU tests (labelled cuda in tests/CMakeLists.txt); --no-tests=error so that a lost
    # label fails loudly instead of passing with nothing run.
    phase ctest-cuda 120 90 "${ctest[@]}" -L cuda --no-tests=error \
      --output-junit "$out/ctest-cuda.xml" || true
    phase ctest-all 300 90 "${ctest[@]}" ${exclude_re:+-E "$exclude_re"} \
      --output-junit "$out/ctest-all.xml" || true
    cp "$build/Testing/Temporary/LastTestsFailed.log" "$out/ctest-failed.txt" 2>/dev/null || true
    gzip -c "$build/Testing/Temporary/LastTest.log" >"$out/ctest-LastTest.log.gz" 2>/dev/null || true
  else
    skip ctest-cuda "the build did not finish"
    skip ctest-all "the build did not finish"
  fi

  if [[ -x "$qtft" ]]; then
    measure
  else
    skip measure "$qtft was not built"
  fi

  write_summary || true
  echo "gpu-check: done in $(awk -v a="$script_start" -v b="$(now)" 'BEGIN{printf "%.0f", b-a}')s;" \
       "$failures phase(s) failed or timed out; $out/summary.json"
  ((failures == 0))
}

case "${1:-}" in
  --pack) (($# <= 2)) || usage; pack "${2:-$root/.gpu-pack}" ;;
  --run) (($# == 2)) || usage; run "$2" ;;
  -h | --help) usage 0 ;;
  *) usage ;;
esac
