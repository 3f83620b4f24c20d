#!/usr/bin/env bash
# Learning-rate sensitivity of the attention modes in a decoder-only language model (issue 45;
# Wortsman et al. 2023, "Small-scale proxies for large-scale Transformer training
# instabilities"): the same small model trained on the same bytes of the English Bible at every
# learning rate from 3e-4 to 1 in half-decade steps, for each mode and seed.
#
#   experiments/lr_sensitivity.sh [extra train options...]
#
# The recipe (docs/results.md, "Learning-rate sensitivity", says why this size): qkgrad-lm's
# model with 2 blocks, d 128, 2 heads (64 a head), FFN 512, context 128 bytes, batches of 16
# windows (2,048 bytes), 600 steps (1.2 M bytes, a third of train.txt) with 60 warm-up steps and
# a cosine decay to 0, AdamW (β₂ 0.95, weight decay 0.1), the gradient norm clipped at 1, no
# z-loss and no dropout; the validation loss on 200 windows of valid.txt every 150 steps. Each
# log line (every 10 steps) records every block's largest attention logit and attention entropy.
# A run whose loss or gradient turns non-finite stops there (--on-nan stop): it diverged.
#
# MODES (default: scaled_dot qknorm rms_qknorm layer_qknorm), LRS (default: 3e-4 1e-3 3e-3
# 1e-2 3e-2 0.1 0.3 1) and SEEDS (default: 1 2) choose the runs; NAME (default lr-sensitivity)
# names experiments/runs/NAME/MODE-lrLR-seedS (the run directories, not committed) and
# experiments/results/NAME/MODE-lrLR-seedS (each finished run's record: options.json,
# metrics.jsonl and outcome.json, committed). Runs with a record are skipped and a stopped run
# resumes where it stopped, so start the script again to go on. Two runs train side by side
# with one thread each (PARALLEL=1 for one at a time with every core). Then
#   python3 experiments/lr_sensitivity.py experiments/results/NAME
# writes the table (experiments/results/NAME.md) and the pictures (NAME-*.svg) from the records.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
name=${NAME:-lr-sensitivity}
modes=${MODES:-scaled_dot qknorm rms_qknorm layer_qknorm}
lrs=${LRS:-3e-4 1e-3 3e-3 1e-2 3e-2 0.1 0.3 1}
seeds=${SEEDS:-1 2}
parallel=${PARALLEL:-2}
[[ $parallel =~ ^[1-9][0-9]*$ ]] || { echo "error: PARALLEL must be a number >= 1, got '$parallel'" >&2; exit 2; }
lm=build/examples/qkgrad-lm
[ -x "$lm" ] || { echo "error: $lm is missing: build first (scripts/test.sh, or ninja -C build)" >&2; exit 2; }
data=experiments/runs/english
[ -f "$data/valid.txt" ] || "$lm" prepare --out "$data"
recipe=(--data "$data" --preset small --layers 2 --d-model 128 --heads 2 --ffn 512 --context 128 --batch-size 16
        --max-steps 600 --warmup 60 --schedule cosine --weight-decay 0.1 --beta2 0.95 --clip 1 --z-loss 0
        --dropout 0 --attention-dropout 0 --eval-every 150 --eval-windows 200 --log-every 10 --save-every 50
        --patience 1000 --max-minutes 0 --on-nan stop)
threads=()  # one thread a run when runs train side by side, else every core
[ "$parallel" -gt 1 ] && threads=(--threads 1)

# One run to its end (a fresh start, or --resume), then its record. A run that stopped on a
# non-finite loss or gradient is recorded as diverged at that step; any other failure stops here.
run_one() {  # MODE LR SEED
  local mode=$1 lr=$2 seed=$3
  local id=$mode-lr$lr-seed$seed
  local run=experiments/runs/$name/$id record=experiments/results/$name/$id
  [ -f "$record/outcome.json" ] && return 0
  mkdir -p "experiments/runs/$name"
  local args=(--run "$run" "${threads[@]}")
  if [ -f "$run/options.json" ]; then args+=(--resume); else
    args+=("${recipe[@]}" --attention "$mode" --lr "$lr" --seed "$seed" "${extra[@]}"); fi
  local status=0
  "$lm" train "${args[@]}" > "$run.log" 2>&1 || status=$?
  local diverged=null
  if [ "$status" != 0 ]; then
    # The NaN guard's message ("train: step N (...): the loss is not finite"), or the update's
    # ("the update of step N made the parameter ... non-finite"): the step where it diverged.
    local line
    line=$(grep -m1 -E 'is not finite|non-finite' "$run.log" || true)
    diverged=$(grep -oE 'step [0-9]+' <<<"$line" | head -1 | grep -oE '[0-9]+' || true)
    if [ -z "$diverged" ]; then
      echo "error: $id failed (exit $status); see $run.log:" >&2
      tail -3 "$run.log" >&2
      return 1
    fi
  fi
  mkdir -p "$record"
  [ -f "$run/metrics.jsonl" ] || : > "$run/metrics.jsonl"  # diverged before its first log line
  cp "$run/options.json" "$run/metrics.jsonl" "$record/"
  printf '{"mode": "%s", "lr": %s, "seed": %s, "diverged_at_step": %s}\n' "$mode" "$lr" "$seed" "$diverged" > "$record/outcome.json"
  echo "$id: $( [ "$diverged" = null ] && echo finished || echo "diverged at step $diverged")"
}

extra=("$@")
jobs=()
for seed in $seeds; do for lr in $lrs; do for mode in $modes; do jobs+=("$mode $lr $seed"); done; done; done
failed=0
for ((i = 0; i < ${#jobs[@]}; i += parallel)); do
  pids=()
  for ((j = i; j < i + parallel && j < ${#jobs[@]}; ++j)); do
    # shellcheck disable=SC2086
    run_one ${jobs[j]} &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  [ "$failed" = 0 ] || exit 1
done
echo "all ${#jobs[@]} runs have records in experiments/results/$name; next: python3 experiments/lr_sensitivity.py experiments/results/$name"
