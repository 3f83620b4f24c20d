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
#   sentence numbers to draw, default "1 2 3"), QKGRAD_TRANSLATE (the binary).
#
# A finished (mode, seed) is not trained again (delete its directory to redo it); an
# interrupted one is resumed (--resume), so the script can be stopped and restarted at will.
# experiments/ted_gl_en.sh and experiments/multi30k_en_de.sh call this with the recipes of
# docs/results.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ $# -lt 5 ]; then
  sed -n '2,18p' "$0"
  exit 2
fi
name=$1 data=$2 src=$3 tgt=$4 tokenize=$5
shift 5
translate=${QKGRAD_TRANSLATE:-build/examples/qkgrad-translate}
seeds=${SEEDS:-1 2}
modes=${MODES:-qknorm scaled_dot}
heatmaps=${HEATMAPS:-1 2 3}

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
mkdir -p "$root"
for mode in $modes; do
  for seed in $seeds; do
    run=$root/$mode-seed$seed
    if [ -f "$run/test.json" ]; then
      echo "== $run: done already"
      continue
    fi
    start=$(date +%s)
    if [ -f "$run/checkpoints/last/model.safetensors" ] && [ ! -f "$run/train.done" ]; then
      echo "== $run: resuming"
      "$translate" train --run "$run" --resume "$@"
    elif [ ! -f "$run/train.done" ]; then
      echo "== $run: training ($mode, seed $seed)"
      "$translate" train --data "$data" --src "$src" --tgt "$tgt" --run "$run" --attn "$mode" --seed "$seed" \
        --bleu-tokenize "$tokenize" "$@"
    fi
    end=$(date +%s)
    # Training time of this invocation (a resumed run adds up in metrics.jsonl's elapsed times).
    [ -f "$run/train.done" ] || echo "$((end - start))" > "$run/train.done"

    echo "== $run: test set"
    "$translate" eval --run "$run" --split test --tokenize "$tokenize" | tee "$run/test.txt"
    "$translate" attention-stats --run "$run" --split test --out "$run/attention-stats.jsonl"
    for k in $heatmaps; do
      line=$(sed -n "${k}p" "$data/test.$src")
      "$translate" attention --run "$run" --text "$line" --out "$run/heatmap-$k" >/dev/null
    done
    # test.json: the numbers summarize.py reads (BLEU and chrF from eval's output).
    python3 - "$run" <<'PY'
import json, re, sys
run = sys.argv[1]
text = open(f"{run}/test.txt").read()
bleu = re.search(r"BLEU = ([0-9.]+)", text)
chrf = re.search(r"chrF = ([0-9.]+)", text)
if not bleu or not chrf:
    sys.exit(f"error: no BLEU/chrF in {run}/test.txt")
seconds = int(open(f"{run}/train.done").read().split()[0])
json.dump({"bleu": float(bleu.group(1)), "chrf": float(chrf.group(1)), "train_seconds": seconds,
           "bleu_line": text.splitlines()[1]}, open(f"{run}/test.json", "w"))
PY
  done
done

mkdir -p experiments/results
python3 experiments/summarize.py "$root" "$name" > "experiments/results/$name.md"
echo "== wrote experiments/results/$name.md"
