#!/usr/bin/env bash
# QKNorm against scaled dot-product attention on one parallel corpus, with identical settings and
# seeds: trains every (mode, seed), evaluates test BLEU and chrF with the best dev checkpoint,
# collects the attention statistics (entropy, max probability, saturation per module) and the
# heatmaps of a few test sentences, then writes a results table (experiments/summarize.py).
#
#   experiments/qknorm_vs_scaled_dot.sh NAME DATA SRC TGT TOKENIZE [train options...]
#     NAME      results go to experiments/runs/NAME/ (runs) and experiments/results/NAME.md
#     DATA      a directory with train/dev/test.{SRC,TGT} (e.g. ../shared/data/ted-gl-en)
#     TOKENIZE  BLEU tokenisation: none (pre-tokenised data such as TED) or 13a (raw text)
#   Environment: SEEDS (default "1 2"), MODES (default "qknorm scaled_dot"), HEATMAPS (test
#   sentence numbers to draw, default "1 2 3"), PARALLEL=1 (train the modes of a seed at the
#   same time, each logging to RUN.log; give --threads 1, which their tests then use too),
#   QKGRAD_TRANSLATE (the binary).
#
# A finished (mode, seed) is not trained again (delete its directory to redo it); an
# interrupted one is resumed (--resume), so the script can be stopped and restarted at will.
# Each finished run's records (test.json, test.txt, test.hyp: the test translations,
# metrics.jsonl, attention-stats.jsonl, gains.txt, options.json, curves.svg: a few hundred KB)
# are copied to experiments/results/NAME/MODE-seedN/, which is committed: a checkout without
# experiments/runs/ (a new machine) keeps them, does not train those runs again, and
# summarize.py (and experiments/lengths.py, on test.hyp) reads them.
# experiments/ted_gl_en.sh and experiments/multi30k_en_de.sh call this with the recipes of
# docs/results.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ $# -lt 5 ]; then
  sed -n '2,24p' "$0"
  exit 2
fi
name=$1 data=$2 src=$3 tgt=$4 tokenize=$5
shift 5
translate=${QKGRAD_TRANSLATE:-build/examples/qkgrad-translate}
seeds=${SEEDS:-1 2}
modes=${MODES:-qknorm scaled_dot}
heatmaps=${HEATMAPS:-1 2 3}
# Side by side, a run's evaluation takes one thread too: the other run may still be training.
eval_threads=()
if [ "${PARALLEL:-0}" = 1 ]; then eval_threads=(--threads 1); fi

for f in "train.$src" "train.$tgt" "dev.$src" "dev.$tgt" "test.$src" "test.$tgt"; do
  if [ ! -f "$data/$f" ]; then
    echo "error: $data/$f does not exist (DATA must hold train/dev/test.{$src,$tgt})" >&2
    exit 1
  fi
done
if [ ! -x "$translate" ]; then
  echo "error: $translate not found: build it first (meson setup build && ninja -C build)" >&2
  exit 1
fi

root=experiments/runs/$name
records=experiments/results/$name
mkdir -p "$root"

# archive RUN RECORD: copy a finished run's small records (what summarize.py reads) to RECORD.
archive() {
  local run=$1 record=$2 f
  mkdir -p "$record"
  for f in test.json test.txt test.hyp metrics.jsonl attention-stats.jsonl gains.txt options.json curves.svg; do
    if [ -f "$run/$f" ]; then cp "$run/$f" "$record/$f"; fi
  done
}

# run_one MODE SEED [train options...]: train (or resume), evaluate, collect statistics.
run_one() {
  local mode=$1 seed=$2
  shift 2
  local run=$root/$mode-seed$seed record=$records/$mode-seed$seed
  if [ -f "$record/test.json" ]; then
    echo "== $run: done already (its records: $record)"
    return 0
  fi
  if [ -f "$run/test.json" ]; then
    echo "== $run: done already"
    archive "$run" "$record"
    return 0
  fi
  if [ -f "$run/checkpoints/last/model.safetensors" ] && [ ! -f "$run/train.done" ]; then
    echo "== $run: resuming"
    "$translate" train --run "$run" --resume "$@"
  elif [ ! -f "$run/train.done" ]; then
    echo "== $run: training ($mode, seed $seed)"
    "$translate" train --data "$data" --src "$src" --tgt "$tgt" --run "$run" --attn "$mode" --seed "$seed" \
      --bleu-tokenize "$tokenize" "$@"
  fi
  touch "$run/train.done"

  echo "== $run: test set"
  "$translate" eval --run "$run" --split test --tokenize "$tokenize" "${eval_threads[@]}" > "$run/test.txt"
  cat "$run/test.txt"
  "$translate" attention-stats --run "$run" --split test --out "$run/attention-stats.jsonl" "${eval_threads[@]}"
  python3 experiments/gains.py "$run" > "$run/gains.txt"  # the learned g / γ / β (checkpoints are not kept)
  local k line
  for k in $heatmaps; do
    line=$(sed -n "${k}p" "$data/test.$src")
    "$translate" attention --run "$run" --text "$line" --out "$run/heatmap-$k" "${eval_threads[@]}" >/dev/null
  done
  # A pre-tokenised corpus is also scored re-tokenised as 13a, as multi-bleu-detok.perl does
  # (the QKNorm code's notebook scores with it): docs/results.md shows how far the two differ.
  # bleu's warning that the text looks tokenised is expected here.
  local bleu_13a=""
  if [ "$tokenize" = none ]; then
    bleu_13a=$("$translate" bleu --ref "$data/test.$tgt" --hyp "$run/test.hyp" --tokenize 13a --metrics bleu \
      --score-only 2>/dev/null)
  fi
  # test.json: the numbers summarize.py reads (BLEU and chrF from eval's output).
  python3 - "$run" "$bleu_13a" <<'PY'
import json, re, sys
run, bleu_13a = sys.argv[1], sys.argv[2]
text = open(f"{run}/test.txt").read()
# sacreBLEU's text form: "BLEU|nrefs:1|...|version:... = 22.00 57.0/... (BP = ...)", "chrF2|... = 43.26"
bleu = re.search(r"^BLEU\|\S* = ([0-9.]+) (.*)$", text, re.M)
chrf = re.search(r"^chrF2\|\S* = ([0-9.]+)", text, re.M)
if not bleu or not chrf:
    sys.exit(f"error: no BLEU/chrF in {run}/test.txt")
record = {"bleu": float(bleu.group(1)), "chrf": float(chrf.group(1)),
          "bleu_line": f"BLEU = {bleu.group(1)} {bleu.group(2)}"}
if bleu_13a:
    record["bleu_13a"] = float(bleu_13a)
json.dump(record, open(f"{run}/test.json", "w"))
PY
  archive "$run" "$record"
}

for seed in $seeds; do
  if [ "${PARALLEL:-0}" = 1 ]; then
    # Every mode of this seed at once, each in the background with its own log; pass --threads 1
    # so that two runs share 2 cores without oversubscription.
    pids=()
    for mode in $modes; do
      run_one "$mode" "$seed" "$@" >> "$root/$mode-seed$seed.log" 2>&1 &  # a resume appends
      pids+=($!)
    done
    failed=0
    for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
    if [ "$failed" -ne 0 ]; then
      echo "error: a run of seed $seed failed; see $root/*-seed$seed.log" >&2
      exit 1
    fi
    echo "== seed $seed done (logs: $root/*-seed$seed.log)"
  else
    for mode in $modes; do run_one "$mode" "$seed" "$@"; done
  fi
done

mkdir -p experiments/results
python3 experiments/summarize.py "$records" "$name" "$root" > "experiments/results/$name.md"
echo "== wrote experiments/results/$name.md"
