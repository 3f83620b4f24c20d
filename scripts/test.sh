#!/usr/bin/env bash
# qkgrad's whole test suite, on a fresh Debian 12 machine or a developer's checkout:
#   installs what is missing (apt-get), builds (release, warnings are errors), runs the Catch2
#   suite and qkgrad-gradcheck, and builds the CUDA backend when nvcc is present.
# Counts: every Catch2 test case, every op checked by qkgrad-gradcheck, and the CUDA build.
# The last line is always "N passed, N failed"; the exit status is non-zero on any failure.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
source scripts/common.sh

passed=0
failed=0
log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT

finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
}

# diatheke and the two Bible modules let the end-to-end corpus test run (it skips without them).
if ! ensure_packages diatheke sword-text-sparv sword-text-web; then
  echo "error: could not install the packages qkgrad needs"
  failed=$((failed + 1))
  finish
fi

echo "== building (build/)"
if ! configure_and_build build; then
  echo "error: the build failed"
  failed=$((failed + 1))
  finish
fi

# ---- Catch2 ----
echo "== Catch2 suite"
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

# ---- qkgrad-gradcheck: one line per op ----
echo "== qkgrad-gradcheck"
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

# ---- the CUDA build (compiles without a GPU; its tests skip without one) ----
nvcc_path=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
if [ -n "$nvcc_path" ]; then
  echo "== CUDA build (build-cuda/, nvcc: $nvcc_path)"
  if PATH="$(dirname "$nvcc_path"):$PATH" configure_and_build build-cuda -Dcuda=true >"$log_dir/cuda.log" 2>&1 &&
     build-cuda/tests/qkgrad-tests "[cuda]" >>"$log_dir/cuda.log" 2>&1; then
    grep -E "skipped|All tests passed" "$log_dir/cuda.log" | sort -u
    echo "CUDA build: PASS"
    passed=$((passed + 1))
  else
    tail -n 40 "$log_dir/cuda.log"
    echo "CUDA build: FAIL"
    failed=$((failed + 1))
  fi
else
  echo "== CUDA build skipped: nvcc not found"
fi

finish
