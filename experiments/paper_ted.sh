#!/usr/bin/env bash
# The paper's own gl→en model trained to the paper's stop (issue 44): `--preset paper` (4+4
# layers, d 512, 4 heads, FFN 2048, 8,000 joint subwords, dropout 0.4, pairs over 79 subwords
# dropped, 4,096-token batches, the reference code's warm-up to 4.94e-4 over 8,000 steps, x0.8
# when a dev BLEU is below each of the 3 before it, stop once the rate is below 5e-5) on TED
# gl→en, QKNorm and scaled dot-product, seed 1, in mixed precision (bf16 products), the two
# modes side by side with one thread each.
#
#   experiments/paper_ted.sh [train]        train (or resume) both modes, then test them
#   experiments/paper_ted.sh check [STEPS]  the same recipe in float32 for QKNorm, to STEPS
#                                           (default 500), against the bf16 run's first STEPS
#
# Two phases. During the warm-up the plateau schedule counts no stall, so dev BLEU (the whole dev
# set, beam 4: slow on a model that has not learnt to stop) is measured every 500 steps only;
# from step 8,000 on, every 100 steps as in the paper's code (its "epoch" of 100 batches). The
# first phase trains each run to step 8,000 (resuming it if it has begun); the second is
# experiments/qknorm_vs_scaled_dot.sh, which resumes both with the paper's evaluation interval,
# tests the best dev checkpoint once the stop rule ends a run, and writes
# experiments/results/ted-paper.md. Stop it at any time (experiments/park.sh ted-paper before a
# session ends) and run it again to go on. Environment: QKGRAD_TRANSLATE (the binary; a copy
# outside build/ keeps a rebuild from changing a run's program), NAME (default ted-paper), MODES
# (default "qknorm scaled_dot"), QKGRAD_RUN_STORE (where the runs live, default /var/tmp/qkgrad-runs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
data=../shared/data/ted-gl-en
translate=${QKGRAD_TRANSLATE:-build/examples/qkgrad-translate}
name=${NAME:-ted-paper}
root=experiments/runs/$name
# --schedule decline is the preset's since 2026-12-07; given here for the runs begun before it (a
# resume keeps a run's stored settings, preset or not, unless a flag changes them).
recipe=(--preset paper --schedule decline --precision bf16 --bleu-tokenize none --threads 1)
warmup=8000

[ -x "$translate" ] || { echo "error: $translate not found: build it first (scripts/test.sh builds it)" >&2; exit 1; }
[ -f "$data/train.gl" ] || { echo "error: $data/train.gl not found (the TED corpus of ../shared/data)" >&2; exit 1; }
# The runs live outside the work tree, experiments/runs/NAME being a link there (unless it is a
# folder already): a later session may get this machine back with its work tree laid anew, and
# then finds the runs where the last one left them, even one that ended before it could park them
# (at most 100 steps behind). park.sh still copies them for a move to another machine.
store=${QKGRAD_RUN_STORE:-/var/tmp/qkgrad-runs}/$name
if [ ! -e "$root" ]; then mkdir -p "$store" "${root%/*}" && ln -s "$(realpath "$store")" "$root"; fi
mkdir -p "$root"

# warm_up RUN MODE PRECISION STEPS: train RUN (new or resumed) to step STEPS with dev BLEU every
# 500 and checkpoints/last saved every 100 steps (a SIGTERM saves too, but a session that ends
# with a SIGKILL would otherwise lose up to 500 steps, half an hour of this machine).
warm_up() {
  local run=$1 mode=$2 precision=$3 steps=$4
  if [ -f "$run/checkpoints/last/model.safetensors" ]; then
    # --threads is the machine's setting, not the run's: a resume that leaves it out takes every
    # core, and two such runs side by side spend much of their time in OpenMP's spinning waits.
    "$translate" train --run "$run" --resume --threads 1 --max-steps "$steps" --eval-every 500 --save-every 100
  else
    "$translate" train --data "$data" --src gl --tgt en --run "$run" --attn "$mode" --seed 1 "${recipe[@]}" \
      --precision "$precision" --max-steps "$steps" --eval-every 500 --save-every 100
  fi
}

case "${1:-train}" in
  train)
    experiments/park.sh --restore "$name"  # runs parked on an earlier machine
    pids=()
    for mode in ${MODES:-qknorm scaled_dot}; do
      if [ -f "$root/$mode-seed1/train.done" ] || [ -f "experiments/results/$name/$mode-seed1/test.json" ]; then continue; fi
      # Appended, not replaced: each resume's log keeps the evaluations of the sessions before it.
      warm_up "$root/$mode-seed1" "$mode" bf16 "$warmup" >> "$root/$mode-seed1.warmup.log" 2>&1 &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || { echo "error: a warm-up failed or was stopped; see $root/*.warmup.log" >&2; exit 1; }; done
    PARALLEL=1 SEEDS=1 MODES="${MODES:-qknorm scaled_dot}" exec experiments/qknorm_vs_scaled_dot.sh "$name" "$data" gl en none \
      "${recipe[@]}" --max-steps 100000 --eval-every 100
    ;;
  check)
    steps=${2:-500}
    check=experiments/runs/$name-f32-check/qknorm-seed1
    mkdir -p "${check%/*}"
    warm_up "$check" qknorm f32 "$steps"
    # The table of experiments/results/ted-paper-bf16-check.md: a log line and an evaluation at
    # the same step are two lines of metrics.jsonl, merged here.
    python3 - "$root/qknorm-seed1/metrics.jsonl" "$check/metrics.jsonl" "$steps" <<'PY'
import json, sys
def rows(path):
    merged = {}
    for r in map(json.loads, open(path)):
        merged.setdefault(r["step"], {}).update(r)
    return merged
bf16, f32, steps = rows(sys.argv[1]), rows(sys.argv[2]), int(sys.argv[3])
both = sorted(s for s in f32 if s <= steps and s in bf16)
print("| step | train loss f32 | train loss bf16 | bf16 − f32 |")
print("|--:|--:|--:|--:|")
for s in (s for s in both if "train_loss" in f32[s] and "train_loss" in bf16[s]):
    a, b = f32[s]["train_loss"], bf16[s]["train_loss"]
    print(f"| {s} | {a:.5f} | {b:.5f} | {b - a:+.5f} |")
print()
print("| step | dev loss f32 | dev loss bf16 | dev BLEU f32 | dev BLEU bf16 |")
print("|--:|--:|--:|--:|--:|")
for s in (s for s in both if "dev_loss" in f32[s] and "dev_loss" in bf16[s]):
    print(f"| {s} | {f32[s]['dev_loss']:.4f} | {bf16[s]['dev_loss']:.4f} | {f32[s]['dev_bleu']:.2f} | {bf16[s]['dev_bleu']:.2f} |")
PY
    ;;
  *) sed -n '2,22p' "$0"; exit 2 ;;
esac
