#!/usr/bin/env bash
# TED talks Galician→English (../shared/data/ted-gl-en: 11,233 / 742 / 1,112 pairs, Moses-
# tokenised, cased), QKNorm vs scaled dot-product, 2 seeds each: the paper's gl→en comparison
# scaled to 2 CPU cores (docs/results.md says how it differs from the paper).
#   experiments/ted_gl_en.sh [DATA] [extra train options...]   (DATA default ../shared/data/ted-gl-en)
# Extra options override the recipe, e.g. --max-steps 300 for a quick trial.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
data=${1:-../shared/data/ted-gl-en}
[ $# -gt 0 ] && shift
# The recipe: 3+3 layers, d 256, 4 heads, FFN 1024, dropout 0.3, 8,000 joint subwords,
# 4,000-token batches, Adam, lr 1e-3 after 800 warm-up steps, cosine decay to 0 at 4,000 steps
# (about 40 epochs), dev BLEU (tokenize none) every 500 steps on the whole dev set.
exec experiments/qknorm_vs_scaled_dot.sh ted-gl-en "$data" gl en none \
  --preset small --layers 3 --d-model 256 --heads 4 --ffn 1024 --dropout 0.3 --vocab-size 8000 \
  --batch-tokens 4000 --lr 1e-3 --warmup 800 --schedule cosine --max-steps 4000 --max-minutes 0 \
  --eval-every 500 --eval-sentences 0 --patience 100 "$@"
