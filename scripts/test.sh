#!/usr/bin/env bash
# qkgrad's whole test suite, on a fresh Debian 12 machine or a developer's checkout:
#   installs what is missing (apt-get), builds (release, warnings are errors), runs the Catch2
#   suite and qkgrad-gradcheck, runs the CUDA attention and row kernels in a CPU emulation, and
#   builds the CUDA backend when nvcc is present.
#
#   scripts/test.sh [--sanitize] [--fuzz SECONDS]
#     --sanitize      also build with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)
#                     and run the Catch2 suite (but the [learning] and [e2e] cases) and qkgrad-gradcheck
#                     there; any report fails.
#     --fuzz SECONDS  also run each libFuzzer target (scripts/fuzz.sh) for SECONDS.
#   CI (.ci/run) passes both: --sanitize --fuzz 20.
# Counts: the layer check (and its planted-include self-test), each committed experiment table
# (regenerated from its records), each test of the experiments' Python helpers, every Catch2
# test case (those under mpirun too), every op checked by qkgrad-gradcheck, the suite once more
# on the other float32 GEMM provider (OpenBLAS, where oneDNN is the default), the CUDA
# emulation, the CUDA build, and (when asked) the sanitized suite and each fuzz target.
# The last line is always "N passed, N failed"; the exit status is non-zero on any failure.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
source scripts/common.sh

sanitize=0
fuzz_seconds=0
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) sanitize=1 ;;
    --fuzz) fuzz_seconds="${2:-}"; shift ;;
    --fuzz=*) fuzz_seconds="${1#--fuzz=}" ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "usage: scripts/test.sh [--sanitize] [--fuzz SECONDS]  (unknown argument '$1')"; echo "0 passed, 1 failed"; exit 2 ;;
  esac
  shift
done
if ! [[ "$fuzz_seconds" =~ ^[0-9]+$ ]]; then
  echo "usage: --fuzz takes a whole number of seconds, got '$fuzz_seconds'"
  echo "0 passed, 1 failed"
  exit 2
fi

passed=0
failed=0
log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT

# stage NAME: a section header with the time since the start (CI must stay under 30 minutes).
stage() {
  printf '== %s  [%d:%02d]\n' "$1" $((SECONDS / 60)) $((SECONDS % 60))
}

finish() {
  printf 'total time %d:%02d\n' $((SECONDS / 60)) $((SECONDS % 60))
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
}

# diatheke and the two Bible modules let the end-to-end corpus test run (it skips without them).
# Open MPI (libopenmpi-dev, openmpi-bin) builds and tests data-parallel training; the build works without it.
if ! ensure_packages diatheke sword-text-sparv sword-text-web libopenmpi-dev openmpi-bin; then
  echo "error: could not install the packages qkgrad needs"
  failed=$((failed + 1))
  finish
fi

stage "building (build/)"
if ! configure_and_build build; then
  echo "error: the build failed"
  failed=$((failed + 1))
  finish
fi

# ---- the layers: no include points upward or sideways (scripts/layers.txt) ----
stage "layer check (scripts/check_layers.sh)"
if scripts/check_layers.sh; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi
# ... and the check itself catches a planted upward include (ops/ including nn/).
planted=$(mktemp -d)
mkdir -p "$planted/ops"
printf '#include "core/tensor.h"\n#include "nn/module.h"\n' > "$planted/ops/planted.cpp"
planted_out=$(scripts/check_layers.sh --root "$planted" 2>&1)
planted_rc=$?
if [ "$planted_rc" -eq 1 ] && [[ "$planted_out" == *'ops/planted.cpp:2: includes "nn/module.h"'* ]]; then
  echo "layer check: a planted upward include (ops/ -> nn/) is caught"
  passed=$((passed + 1))
else
  echo "error: the layer check did not catch a planted include of nn/ from ops/ (status $planted_rc): $planted_out"
  failed=$((failed + 1))
fi
rm -rf "$planted"

# ---- the committed experiment tables are what their committed records give ----
stage "experiment tables (experiments/summarize.py or lr_sensitivity.py on experiments/results/NAME/)"
for records in experiments/results/*/; do
  name=$(basename "$records")
  if compgen -G "$records*/outcome.json" > /dev/null; then  # a learning-rate sweep: experiments/lr_sensitivity.py
    mkdir -p "$log_dir/$name"
    if python3 experiments/lr_sensitivity.py "$records" --out "$log_dir/$name" > /dev/null 2> "$log_dir/$name.err" &&
       diff -u "experiments/results/$name.md" "$log_dir/$name/$name.md" > "$log_dir/$name.diff" &&
       diff -q "experiments/results/$name-loss.svg" "$log_dir/$name/$name-loss.svg" >> "$log_dir/$name.diff" &&
       diff -q "experiments/results/$name-logits.svg" "$log_dir/$name/$name-logits.svg" >> "$log_dir/$name.diff"; then
      echo "experiments/results/$name.md and its pictures: match their records"
      passed=$((passed + 1))
    else
      echo "error: experiments/results/$name.md or $name-*.svg is not what its records in $records give;"
      echo "       regenerate them: python3 experiments/lr_sensitivity.py $records"
      cat "$log_dir/$name.err" "$log_dir/$name.diff"
      failed=$((failed + 1))
    fi
    continue
  fi
  if python3 experiments/summarize.py "$records" "$name" > "$log_dir/$name.md" 2> "$log_dir/$name.err" &&
     diff -u "experiments/results/$name.md" "$log_dir/$name.md" > "$log_dir/$name.diff"; then
    echo "experiments/results/$name.md: matches its records"
    passed=$((passed + 1))
  else
    echo "error: experiments/results/$name.md is not what its records in $records give;"
    echo "       regenerate it: python3 experiments/summarize.py $records $name > experiments/results/$name.md"
    cat "$log_dir/$name.err" "$log_dir/$name.diff"
    failed=$((failed + 1))
  fi
done

# ---- the Python helpers of experiments/ (gains.py, summarize.py) ----
stage "experiment helpers (python3 -m unittest tests/test_experiment_helpers.py)"
python3 -m unittest -v tests/test_experiment_helpers.py > "$log_dir/helpers.log" 2>&1
helpers_rc=$?
helpers_ok=$(grep -c ' \.\.\. ok$' "$log_dir/helpers.log")
helpers_bad=$(grep -cE ' \.\.\. (FAIL|ERROR)$' "$log_dir/helpers.log")
if [ "$helpers_rc" -ne 0 ] && [ "$helpers_bad" -eq 0 ]; then helpers_bad=1; fi  # it did not even run
echo "$helpers_ok passed, $helpers_bad failed"
[ "$helpers_bad" -eq 0 ] || cat "$log_dir/helpers.log"
passed=$((passed + helpers_ok))
failed=$((failed + helpers_bad))

# ---- Catch2 ----
stage "Catch2 suite"
build/tests/qkgrad-tests 2>&1 | tee "$log_dir/catch2.log"
catch_rc=${PIPESTATUS[0]}
summary=$(grep -E "^(All tests passed|test cases:)" "$log_dir/catch2.log" | tail -n 1)
if [[ "$summary" =~ ^All\ tests\ passed\ \(([0-9]+)\ assertions?\ in\ ([0-9]+)\ test\ cases?\) ]]; then
  passed=$((passed + BASH_REMATCH[2]))
elif [[ "$summary" =~ test\ cases:\ *([0-9]+)\ \|\ *([0-9]+)\ passed\ \|\ *([0-9]+)\ failed ]]; then
  passed=$((passed + BASH_REMATCH[2]))
  failed=$((failed + BASH_REMATCH[3]))
else
  echo "error: the Catch2 suite ended without a summary (exit status $catch_rc): it crashed"
  failed=$((failed + 1))
fi
if [ "$catch_rc" -ne 0 ] && [ -n "$summary" ] && [[ "$summary" == All* ]]; then
  echo "error: the Catch2 suite exited with status $catch_rc"
  failed=$((failed + 1))
fi

# ---- data-parallel training under mpirun: the Catch2 cases tagged [mpi] (tests/test_distributed.cpp,
# hidden from the plain suite above), which start qkgrad-translate as 2 and 3 ranks ----
if grep -q -- "-DQKGRAD_HAVE_MPI" build/build.ninja && command -v mpirun >/dev/null 2>&1; then
  stage "data-parallel training under mpirun (Catch2 [mpi])"
  build/tests/qkgrad-tests "[mpi]" > "$log_dir/mpi.log" 2>&1
  mpi_rc=$?
  mpi_summary=$(grep -aE "^(All tests passed|test cases:)" "$log_dir/mpi.log" | tail -n 1)
  if [[ "$mpi_summary" =~ ^All\ tests\ passed\ \(([0-9]+)\ assertions?\ in\ ([0-9]+)\ test\ cases?\) ]] && [ "$mpi_rc" -eq 0 ]; then
    echo "mpirun tests: $mpi_summary"
    passed=$((passed + BASH_REMATCH[2]))
  elif [[ "$mpi_summary" =~ test\ cases:\ *([0-9]+)\ \|\ *([0-9]+)\ passed\ \|\ *([0-9]+)\ failed ]]; then
    grep -a -B2 -A20 "FAILED" "$log_dir/mpi.log" | head -n 120
    passed=$((passed + BASH_REMATCH[2]))
    failed=$((failed + BASH_REMATCH[3]))
  else
    tail -n 40 "$log_dir/mpi.log"
    echo "error: the mpirun tests ended without a summary (exit status $mpi_rc)"
    failed=$((failed + 1))
  fi
else
  stage "data-parallel tests skipped: the build has no MPI (libopenmpi-dev) or mpirun is missing"
fi

# ---- qkgrad-gradcheck: one line per op ----
stage "qkgrad-gradcheck"
build/examples/qkgrad-gradcheck 2>&1 | tee "$log_dir/gradcheck.log"
gradcheck_rc=${PIPESTATUS[0]}
ops_passed=$(grep -cE "^op .* PASS$" "$log_dir/gradcheck.log")
ops_failed=$(grep -cE "^op .* FAIL$" "$log_dir/gradcheck.log")
passed=$((passed + ops_passed))
failed=$((failed + ops_failed))
if [ "$gradcheck_rc" -ne 0 ] && [ "$ops_failed" -eq 0 ]; then
  echo "error: qkgrad-gradcheck exited with status $gradcheck_rc"
  failed=$((failed + 1))
fi

# ---- the other float32 GEMM provider: the default is oneDNN where the build found it; the same
# suite runs once more on OpenBLAS (backends/cpu/cpu_gemm_provider.h), counted as one result. Not
# the [learning] case (a minute of CI): its products are the ones the shorter cases check; nor
# the corpus preparation ([bible]), which multiplies no matrices ----
if grep -q -- "-ldnnl" build/build.ninja; then
  stage "Catch2 suite with QKGRAD_CPU_GEMM=openblas (the other float32 GEMM provider; all but [learning] and [bible])"
  QKGRAD_CPU_GEMM=openblas build/tests/qkgrad-tests "~[.]~[learning]~[bible]" > "$log_dir/catch2-openblas.log" 2>&1
  openblas_rc=$?
  openblas_summary=$(grep -E "^(All tests passed|test cases:)" "$log_dir/catch2-openblas.log" | tail -n 1)
  if [ "$openblas_rc" -eq 0 ] && [[ "$openblas_summary" == All* ]]; then
    echo "suite on OpenBLAS: PASS ($openblas_summary)"
    passed=$((passed + 1))
  else
    echo "suite on OpenBLAS: FAIL (exit $openblas_rc; ${openblas_summary:-no summary}); the failures:"
    grep -B2 -A12 "FAILED" "$log_dir/catch2-openblas.log" | head -n 80
    failed=$((failed + 1))
  fi
fi

# ---- the CUDA build (compiles without a GPU; its tests skip without one) ----
# GPU code for one architecture only (sm_90, -Dgpu_arch=h200): the kernels are the same for
# every architecture, and the portable default (three of them) would add minutes to CI.
nvcc_path=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
if [ -n "$nvcc_path" ]; then
  stage "CUDA build (build-cuda/, sm_90, nvcc: $nvcc_path)"
  # The targets that use the GPU (the GPU's test cases and the programs with --device), not
  # all: the rest of the suite is the same code with or without CUDA, built and run above.
  if PATH="$(dirname "$nvcc_path"):$PATH" configure build-cuda -Dcuda=true -Dgpu_arch=h200 >"$log_dir/cuda.log" 2>&1 &&
     ninja -C build-cuda tests/qkgrad-tests-cuda examples/qkgrad-translate examples/qkgrad-lm bench/qkgrad-bench \
       bench/qkgrad-bench-attention bench/qkgrad-bench-lm >>"$log_dir/cuda.log" 2>&1 &&
     build-cuda/tests/qkgrad-tests-cuda "[cuda]" >>"$log_dir/cuda.log" 2>&1; then
    grep -E "skipped|All tests passed" "$log_dir/cuda.log" | sort -u
    echo "CUDA build: PASS"
    passed=$((passed + 1))
  else
    tail -n 40 "$log_dir/cuda.log"
    echo "CUDA build: FAIL"
    failed=$((failed + 1))
  fi
else
  stage "CUDA build skipped: nvcc not found"
fi

# ---- the CUDA attention and row kernels, run on the CPU in an emulation of their threads ----
stage "CUDA attention and row kernels in a CPU emulation (tests/cuda_emulation/run.sh)"
tests/cuda_emulation/run.sh build 2>&1 | tee "$log_dir/emulation.log"
emulation_line=$(tail -n 1 "$log_dir/emulation.log")
if [[ "$emulation_line" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]] && [ "${BASH_REMATCH[2]}" -eq 0 ] &&
   [ "${BASH_REMATCH[1]}" -gt 0 ]; then
  echo "CUDA kernel emulation: PASS"
  passed=$((passed + 1))
else
  echo "CUDA kernel emulation: FAIL"
  failed=$((failed + 1))
fi

# ---- AddressSanitizer + UndefinedBehaviorSanitizer: the whole Catch2 suite and the gradient checks ----
if [ "$sanitize" -eq 1 ]; then
  stage "sanitizers: building build-asan/ (clang, ASan + UBSan, debugoptimized)"
  # Every report is fatal (halt_on_error), leaks included; a report names the file and line.
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
  # clang, not GCC: it builds the sanitized tree in a third of the time (GCC took 15 of CI's 30
  # minutes), and its UBSan also checks float-to-int casts. Not --werror: clang reports loops
  # it was asked to vectorize and could not (-Wpass-failed), which are not errors.
  # -g1: line tables only (reports still name the file and line), a much faster build than -g.
  # A build-asan/ made with GCC by an older checkout is made again (meson keeps a tree's compiler).
  # -Dfuzz=true: both sanitizers on every file, and libFuzzer's coverage instrumentation, so
  # that the fuzzers below link against this tree rather than build one of their own (3 minutes).
  if [ -f build-asan/build.ninja ] && ! grep -q 'clang++' build-asan/build.ninja; then rm -rf build-asan; fi
  if ensure_clang >"$log_dir/asan-build.log" 2>&1 &&
     CC=clang CXX=clang++ configure build-asan --buildtype=debugoptimized -Dfuzz=true -Db_sanitize=none -Db_lundef=false \
       -Dwerror=false -Dcpp_args=-g1 >>"$log_dir/asan-build.log" 2>&1 &&
     ninja -C build-asan tests/qkgrad-tests examples/qkgrad-gradcheck examples/qkgrad-translate examples/qkgrad-lm examples/qkgrad-mlp \
       >>"$log_dir/asan-build.log" 2>&1; then
    fuzz_build=build-asan
    # Not the [learning] cases (a Transformer trained for 600 steps to a quality bar: 2 of the
    # sanitized suite's 6.5 minutes), whose code the shorter cases also run: they run in the two
    # optimised suites above. Nor the [e2e] cases (the real Bible and English corpora built from
    # Debian's packages, the PyTorch cross-check: about a minute here), whose parsers and
    # commands the shorter cases and the fuzzers run under the sanitizers; they run in the
    # optimised suite. ("~[.]": a test spec would otherwise also run the hidden cases, those for
    # mpirun and the reliability helper.)
    stage "sanitizers: Catch2 suite (all but [learning] and [e2e])"
    build-asan/tests/qkgrad-tests "~[.]~[learning]~[e2e]" >"$log_dir/asan.log" 2>&1
    asan_rc=$?
    build-asan/examples/qkgrad-gradcheck >>"$log_dir/asan.log" 2>&1
    gradcheck_asan_rc=$?
    asan_summary=$(grep -E "^(All tests passed|test cases:)" "$log_dir/asan.log" | tail -n 1)
    if [ "$asan_rc" -eq 0 ] && [ "$gradcheck_asan_rc" -eq 0 ] && ! grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$log_dir/asan.log"; then
      echo "sanitized suite: PASS ($asan_summary; qkgrad-gradcheck clean)"
      passed=$((passed + 1))
    else
      grep -E -B2 -A30 "ERROR: (Address|Leak)Sanitizer|runtime error:|FAILED|failed" "$log_dir/asan.log" | head -n 120
      echo "sanitized suite: FAIL (Catch2 exit $asan_rc, qkgrad-gradcheck exit $gradcheck_asan_rc; $asan_summary)"
      failed=$((failed + 1))
    fi
  else
    tail -n 40 "$log_dir/asan-build.log"
    echo "sanitized suite: FAIL (the build-asan/ build failed)"
    failed=$((failed + 1))
  fi
  unset ASAN_OPTIONS UBSAN_OPTIONS
fi

# ---- libFuzzer targets (clang) ----
if [ "$fuzz_seconds" -gt 0 ]; then
  stage "fuzzers: ${fuzz_seconds} s each (scripts/fuzz.sh)"
  QKGRAD_FUZZ_BUILD="${fuzz_build:-build-fuzz}" scripts/fuzz.sh "$fuzz_seconds" 2>&1 | tee "$log_dir/fuzz.log"
  fuzz_rc=${PIPESTATUS[0]}
  fuzz_passed=$(grep -cE "^fuzz .*: PASS" "$log_dir/fuzz.log")
  fuzz_failed=$(grep -cE "^fuzz .*: FAIL" "$log_dir/fuzz.log")
  passed=$((passed + fuzz_passed))
  failed=$((failed + fuzz_failed))
  if [ "$fuzz_rc" -ne 0 ] && [ "$fuzz_failed" -eq 0 ]; then
    echo "error: scripts/fuzz.sh exited with status $fuzz_rc"
    failed=$((failed + 1))
  fi
fi

finish
