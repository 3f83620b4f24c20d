#!/usr/bin/env bash
# Multi30k English→German (../shared/data/multi30k-en-de: 29,000 / 1,014 / 1,000 pairs, raw
# text), QKNorm vs scaled dot-product, 2 seeds each, BLEU with sacreBLEU's 13a tokeniser.
#   experiments/multi30k_en_de.sh [DATA] [extra train options...]   (DATA default ../shared/data/multi30k-en-de)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
data=${1:-../shared/data/multi30k-en-de}
[ $# -gt 0 ] && shift
# The recipe: as experiments/ted_gl_en.sh (the demo model, dropout 0.2, 4,000 subwords,
# 3,000-token batches, lr 1.5e-3, 300 warm-up steps, cosine), 1,000 steps (about 5 epochs of
# 194 batches; a run takes about 35 minutes on one core).
PARALLEL=1 exec experiments/qknorm_vs_scaled_dot.sh multi30k-en-de "$data" en de 13a \
  --preset demo --dropout 0.2 --vocab-size 4000 --batch-tokens 3000 --lr 1.5e-3 --warmup 300 \
  --schedule cosine --max-steps 1000 --max-minutes 0 --eval-every 500 --eval-sentences 150 \
  --patience 100 --threads 1 "$@"
