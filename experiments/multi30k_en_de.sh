#!/usr/bin/env bash
# Multi30k English→German (../shared/data/multi30k-en-de: 29,000 / 1,014 / 1,000 pairs, raw
# text), QKNorm vs scaled dot-product, 2 seeds each, BLEU with sacreBLEU's 13a tokeniser.
#   experiments/multi30k_en_de.sh [DATA] [extra train options...]   (DATA default ../shared/data/multi30k-en-de)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
data=${1:-../shared/data/multi30k-en-de}
[ $# -gt 0 ] && shift
# The recipe: 3+3 layers, d 256, 4 heads, FFN 1024, dropout 0.3, 8,000 joint subwords,
# 4,000-token batches, lr 1e-3 after 800 warm-up steps, cosine decay to 0 at 5,000 steps
# (about 20 epochs), dev BLEU every 500 steps on the whole dev set.
exec experiments/qknorm_vs_scaled_dot.sh multi30k-en-de "$data" en de 13a \
  --preset small --layers 3 --d-model 256 --heads 4 --ffn 1024 --dropout 0.3 --vocab-size 8000 \
  --batch-tokens 4000 --lr 1e-3 --warmup 800 --schedule cosine --max-steps 5000 --max-minutes 0 \
  --eval-every 500 --eval-sentences 0 --patience 100 "$@"
