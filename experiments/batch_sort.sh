#!/usr/bin/env bash
# What `--batch-sort longer` saves: the paper preset on TED gl→en (the paper runs' recipe, bf16,
# seed 1) trained for two epochs with each batch order, the two side by side with one thread each
# as the paper runs train. Prints each order's batches, padding and seconds per epoch (the second
# epoch apart: the first also builds oneDNN's kernels for each new batch shape). About 10 minutes
# on 2 cores; run it on an otherwise idle machine.
#   experiments/batch_sort.sh [DATA]   (DATA default ../shared/data/ted-gl-en)
# Environment: QKGRAD_TRANSLATE (the binary). The runs go to experiments/runs/batch-sort/ and
# are made anew each time.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
data=${1:-../shared/data/ted-gl-en}
translate=${QKGRAD_TRANSLATE:-build/examples/qkgrad-translate}
root=experiments/runs/batch-sort
[ -x "$translate" ] || { echo "error: $translate not found: build it first (scripts/test.sh builds it)" >&2; exit 1; }
[ -f "$data/train.gl" ] || { echo "error: $data/train.gl not found (the TED corpus of ../shared/data)" >&2; exit 1; }
rm -rf "$root"
mkdir -p "$root"

recipe=(--data "$data" --src gl --tgt en --preset paper --precision bf16 --seed 1 --threads 1 --eval-every 1000000
        --eval-sentences 1)
# An epoch is 98 batches by target, 82 by the longer side, on the course cut of TED (the start-up
# line says how many; the table below checks it). The faster order trains a third epoch, stopped
# when the other ends its second, so that both epochs measured share the two cores alike.
"$translate" train "${recipe[@]}" --run "$root/target" --batch-sort target --max-steps 196 --log-every 98 \
  > "$root/target.log" 2>&1 &
target=$!
"$translate" train "${recipe[@]}" --run "$root/longer" --batch-sort longer --max-steps 246 --log-every 82 \
  > "$root/longer.log" 2>&1 &
longer=$!
wait "$target"
kill -TERM "$longer" 2>/dev/null || true
wait "$longer" || true

python3 - "$root" <<'PY'
import json, re, sys
root = sys.argv[1]
print(f"| batch sort | batches an epoch | real tokens (source / target) | epoch 1 (s) | epoch 2 (s) |")
print("|---|--:|--:|--:|--:|")
for sort in ("target", "longer"):
    log = open(f"{root}/{sort}.log").read()
    m = re.search(r"(\d+) batches of <= \d+ tokens per epoch, sorted by the \w+ side \(real tokens: (\d+)% of the "
                  r"padded source, (\d+)% of the target\)", log)
    if not m:
        sys.exit(f"error: no batch line in {root}/{sort}.log")
    batches = int(m.group(1))
    steps = {}
    for line in open(f"{root}/{sort}/metrics.jsonl"):
        record = json.loads(line)
        if "elapsed_s" in record:
            steps[record["step"]] = record["elapsed_s"]
    if batches not in steps or 2 * batches not in steps:
        sys.exit(f"error: {root}/{sort}/metrics.jsonl lacks the log lines at steps {batches} and {2 * batches}: "
                 f"the epoch length is not what the script assumes")
    first, second = steps[batches], steps[2 * batches] - steps[batches]
    print(f"| {sort} | {batches} | {m.group(2)}% / {m.group(3)}% | {first:.0f} | {second:.0f} |")
PY
