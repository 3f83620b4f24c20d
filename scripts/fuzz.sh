#!/usr/bin/env bash
# Runs qkgrad's libFuzzer targets (fuzz/) one after another, each for a fixed time:
#   fuzz-safetensors  the safetensors reader (io/safetensors.h)
#   fuzz-corpus       the corpus reader and cleaner (translation/corpus.h)
#   fuzz-bleu         the 13a tokenizer, BLEU and chrF (translation/bleu.h)
#
#   scripts/fuzz.sh [SECONDS]      (default 60 seconds per target; CI uses 60)
#
# Installs clang and libFuzzer when missing (apt-get, as scripts/test.sh does), builds build-fuzz/
# or the tree QKGRAD_FUZZ_BUILD names (clang, -Dfuzz=true: libFuzzer + AddressSanitizer +
# UndefinedBehaviorSanitizer), replays the
# inputs in fuzz/regressions/<target>/ (each once bugs the fuzzers found), then fuzzes from a copy
# of the seed corpus fuzz/corpus/<target>/ in a temporary directory: the repository never gets
# new files. Prints one line per target, "fuzz <target>: PASS (...)" or "fuzz <target>: FAIL"
# followed by the input that failed and the command that reproduces it; the exit status is
# non-zero if any target failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
source scripts/common.sh

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
  echo "usage: scripts/fuzz.sh [SECONDS]   (a whole number of seconds per target, got '$seconds')" >&2
  exit 2
fi
targets=(safetensors corpus bleu)
# QKGRAD_FUZZ_BUILD names another tree configured with -Dfuzz=true (scripts/test.sh passes its
# sanitized build-asan/, so that CI builds the library once for both).
build_dir="${QKGRAD_FUZZ_BUILD:-build-fuzz}"

ensure_clang || exit 1

if [ ! -f "$build_dir/build.ninja" ]; then
  CC=clang CXX=clang++ meson setup "$build_dir" -Dfuzz=true -Dnative_arch=false \
    --buildtype=debugoptimized || exit 1
elif ! grep -q -- '-fsanitize=fuzzer-no-link' "$build_dir/build.ninja"; then
  echo "scripts/fuzz.sh: $build_dir/ is not configured with -Dfuzz=true (clang); remove it or name another tree" >&2
  exit 1
fi
ninja -C "$build_dir" "${targets[@]/#/fuzz/fuzz-}" || exit 1

work=$(mktemp -d /tmp/qkgrad-fuzz.XXXXXX)
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
failed=0

# fail TARGET INPUT LOG: the FAIL line and how to reproduce.
fail() {
  echo "fuzz $1: FAIL"
  echo "  input:     $2"
  echo "  reproduce: $build_dir/fuzz/fuzz-$1 $2"
  echo "  log:       $3"
  failed=$((failed + 1))
}

for target in "${targets[@]}"; do
  exe="$build_dir/fuzz/fuzz-$target"
  dir="$work/$target"
  mkdir -p "$dir/corpus" "$dir/artifacts"
  log="$dir/fuzz.log"

  # 1. Every input that once failed must pass now (libFuzzer runs files given by name once).
  regression_failed=0
  for input in fuzz/regressions/"$target"/*; do
    [ -f "$input" ] || continue
    if ! "$exe" "$input" >>"$dir/regressions.log" 2>&1; then
      fail "$target" "$input" "$dir/regressions.log"
      regression_failed=1
      break
    fi
  done
  [ "$regression_failed" -eq 1 ] && continue

  # 2. Fuzz for the given time from a copy of the seed corpus (new inputs go to the copy).
  cp fuzz/corpus/"$target"/* "$dir/corpus/"
  options=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
           -artifact_prefix="$dir/artifacts/")
  [ -f "fuzz/$target.dict" ] && options+=(-dict="fuzz/$target.dict")
  echo "== fuzz-$target: ${seconds} s (log: $log)"
  if "$exe" "${options[@]}" "$dir/corpus" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    echo "fuzz $target: PASS (${runs:-?} inputs in ${seconds} s, ${rate:-?} per second)"
  else
    # crash-*, leak-*, timeout-* or oom-*: the input libFuzzer saved when it stopped.
    artifact=$(ls "$dir"/artifacts/{crash,leak,timeout,oom}-* 2>/dev/null | head -n 1)
    grep -E "invariant violated|ERROR: |SUMMARY: |runtime error" "$log" | head -n 5 | sed 's/^/  /'
    fail "$target" "${artifact:-(none saved; see the log)}" "$log"
  fi
done

if [ "$failed" -eq 0 ]; then
  rm -rf "$work"
else
  echo "kept $work for the failing inputs; once fixed, add each to fuzz/regressions/<target>/"
fi
[ "$failed" -eq 0 ]
