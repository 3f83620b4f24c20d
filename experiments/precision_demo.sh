#!/usr/bin/env bash
# Mixed precision against float32 on the demo (issue 42): the demo recipe (QKNorm, --preset demo,
# the embedded Bible corpus) trained with `--precision f32` and `--precision bf16`, same seeds,
# the same number of steps (the preset's time budget is lifted so that a slow or shared machine
# still runs all of them: quality is compared at equal steps, speed by bench/compare_torch.py).
# Each run is evaluated on the test set with its best dev checkpoint; the tables go to
# experiments/results/demo-f32.md and demo-bf16.md (experiments/summarize.py), the records to
# experiments/results/demo-{f32,bf16}/.
#
#   experiments/precision_demo.sh [train options...]
#   Environment: SEEDS (default "1 2"); QKGRAD_TRANSLATE (the binary).
#
# The seeds alternate between the precisions (f32 1, bf16 1, f32 2, bf16 2), so that a stopped
# script leaves comparable pairs; restarting it skips finished runs and resumes an interrupted
# one (experiments/qknorm_vs_scaled_dot.sh does the work).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

translate=${QKGRAD_TRANSLATE:-build/examples/qkgrad-translate}
data=demo/bible-es-en
if [ ! -x "$translate" ]; then
  echo "error: $translate not found: build it first (meson setup build && ninja -C build)" >&2
  exit 1
fi
if [ ! -f "$data/test.en" ]; then
  echo "== preparing the Bible corpus ($data)"
  "$translate" prepare-bible --out "$data"
fi

for seed in ${SEEDS:-1 2}; do
  for precision in f32 bf16; do
    SEEDS=$seed MODES=qknorm experiments/qknorm_vs_scaled_dot.sh "demo-$precision" "$data" es en 13a \
      --preset demo --precision "$precision" --max-minutes 120 "$@"
  done
done
echo "== tables: experiments/results/demo-f32.md, experiments/results/demo-bf16.md"
