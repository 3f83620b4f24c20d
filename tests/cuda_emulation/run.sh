#!/usr/bin/env bash
# Runs CUDA kernels on the CPU, in the host emulation of emu.h, against the CPU backend: the
# check that the kernels compute the right thing on a machine without a GPU. Three drivers:
#   attention_emulation.cpp  the attention kernels (backends/cuda/cuda_attention.cu);
#   norm_emulation.cpp       the row kernels of backends/cuda/cuda_norm.cu (softmax, layer norm,
#                            RMSNorm, l2 normalisation, forward and backward);
#   modes_emulation.cpp      the QK-norm modes rms_qknorm and layer_qknorm as the GPU runs them
#                            (the norm kernels, then the attention kernels) against the CPU op.
# It cannot check the GPU memory model, real scheduling, CUDA's math library or speed
# (docs/cuda-backend.md).
#
#   tests/cuda_emulation/run.sh [--full] [BUILD]
#     BUILD   a configured CPU build whose layer libraries (libqkgrad-*.a) are up to date
#             (default build/)
#     --full  also under AddressSanitizer, and the long attention rows (300 keys, 260 queries):
#             minutes
#
# Each pass runs every driver's configurations with a different tile, grid and block-size limit,
# so the kernels' loops over many tiles and the grid-stride loops are exercised. The last line
# is "N passed, N failed" (configurations × dtypes × passes).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
full=0
[ "${1:-}" = "--full" ] && { full=1; shift; }
build=${1:-build}
out=build-emulation
# The library's layers (meson.build), grouped: core calls backend(), which backends defines.
libs=()
for layer in io nn ops backends core; do
  lib=$build/libqkgrad-$layer.a
  if [ ! -f "$lib" ]; then
    echo "error: $lib not found: build it first (meson setup $build && ninja -C $build)"
    echo "0 passed, 1 failed"
    exit 1
  fi
  libs+=("$lib")
done
mkdir -p "$out"
python3 tests/cuda_emulation/extract_kernels.py . "$out" || { echo "0 passed, 1 failed"; exit 1; }

# The libraries the CPU library needs: OpenBLAS, and oneDNN where the build found it.
extra_libs=(-lopenblas)
if grep -q -- "-ldnnl" "$build/build.ninja"; then extra_libs+=(-ldnnl); fi

drivers=(attention norm modes)
# compile SUFFIX [flags...]: every driver NAME_emulation.cpp linked with the CPU library, as
# $out/NAME_emulationSUFFIX.
compile() {
  local suffix=$1 name
  shift
  for name in "${drivers[@]}"; do
    g++ -std=c++20 -O1 -g -Wall -Wextra -Werror -I. -I"$out" -Itests/cuda_emulation "$@" \
      "tests/cuda_emulation/${name}_emulation.cpp" -Wl,--start-group "${libs[@]}" -Wl,--end-group "${extra_libs[@]}" \
      -fopenmp -pthread -o "$out/${name}_emulation$suffix" || return 1
  done
}
compile "" || { echo "0 passed, 1 failed"; exit 1; }

passed=0
failed=0
# pass LABEL SUFFIX TILE BLOCKS THREADS [--long]: every driver, THREADS per block in every kernel
# (empty: the real sizes, 128 for the attention tile kernels, 256 for its row kernels and the
# grid-stride kernels, up to 1024 for the norm kernels' rows; any multiple of 32 must work) and
# at most BLOCKS blocks per launch.
pass() {
  local label=$1 suffix=$2 tile=$3 blocks=$4 threads=$5 name
  shift 5
  for name in "${drivers[@]}"; do
    echo "== $label, $name: tiles of at most $tile rows, at most $blocks blocks per launch, ${threads:-the real} threads"
    local log="$out/$label-$name.log"
    EMU_MAX_TILE=$tile EMU_MAX_BLOCKS=$blocks EMU_TILE_THREADS=${threads:-128} EMU_ROW_THREADS=${threads:-256} \
      EMU_ELEMENT_THREADS=${threads:-256} EMU_MAX_ROW_THREADS=${threads:-1024} \
      OMP_NUM_THREADS=1 "$out/${name}_emulation$suffix" "$@" > "$log" 2>&1
    local rc=$?
    grep -E "^FAIL|^    " "$log"
    local line
    line=$(tail -n 1 "$log")
    if [[ "$line" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
      passed=$((passed + BASH_REMATCH[1]))
      failed=$((failed + BASH_REMATCH[2]))
      [ "$rc" -ne 0 ] && [ "${BASH_REMATCH[2]}" -eq 0 ] && failed=$((failed + 1))
    else
      tail -n 20 "$log"
      failed=$((failed + 1))
    fi
    echo "$line"
  done
}
pass default "" 32 1048576 ""
pass tiles-of-2 "" 2 2 32
pass tiles-of-4 "" 4 1 64
if [ "$full" = 1 ]; then
  compile _asan -fsanitize=address,undefined -fno-sanitize-recover=all ||
    { echo "$passed passed, $((failed + 1)) failed"; exit 1; }
  export ASAN_OPTIONS=detect_leaks=0
  pass asan-tiles-of-8-long _asan 8 3 "" --long
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
