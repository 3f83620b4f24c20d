#!/usr/bin/env bash
# Mixed precision against float32 on TED gl→en (issue 42): the TED recipe (experiments/ted_gl_en.sh,
# QKNorm, the demo-size model) at 2,400 steps, trained with `--precision f32` and
# `--precision bf16`, same seeds, same steps. The two precisions of a seed train side by side
# with one thread each (so this compares quality, not speed: bench/compare_torch.py measures
# speed). Each run is tested with its best dev checkpoint; the tables go to
# experiments/results/ted-gl-en-2400-{f32,bf16}.md, the records to
# experiments/results/ted-gl-en-2400-{f32,bf16}/.
#
#   experiments/precision_ted.sh [DATA] [train options...]   (DATA default ../shared/data/ted-gl-en)
#   Environment: SEEDS (default "1 2").
#
# Restarting it skips finished runs and resumes interrupted ones (experiments/qknorm_vs_scaled_dot.sh);
# experiments/park.sh ted-gl-en-2400-f32 (and -bf16) carries unfinished runs to a new machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
data=${1:-../shared/data/ted-gl-en}
[ $# -gt 0 ] && shift

mkdir -p experiments/runs
for seed in ${SEEDS:-1 2}; do
  pids=()
  for precision in f32 bf16; do
    name=ted-gl-en-2400-$precision
    SEEDS=$seed MODES=qknorm NAME=$name experiments/ted_gl_en.sh "$data" --max-steps 2400 \
      --precision "$precision" "$@" > "experiments/runs/$name-seed$seed.log" 2>&1 &
    pids+=($!)
  done
  failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  if [ "$failed" -ne 0 ]; then
    echo "error: a run of seed $seed failed; see experiments/runs/ted-gl-en-2400-*-seed$seed.log" >&2
    exit 1
  fi
  echo "== seed $seed done"
done
echo "== tables: experiments/results/ted-gl-en-2400-f32.md, experiments/results/ted-gl-en-2400-bf16.md"
