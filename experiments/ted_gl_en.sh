#!/usr/bin/env bash
# TED talks Galician→English (../shared/data/ted-gl-en: 11,233 / 742 / 1,112 pairs, Moses-
# tokenised, cased), QKNorm vs scaled dot-product, 2 seeds each: the paper's gl→en comparison
# scaled down to what 2 CPU cores train in about 15 minutes per run (docs/results.md says how it
# differs from the paper). BLEU with --tokenize none: the data is already tokenised.
#   experiments/ted_gl_en.sh [DATA] [extra train options...]   (DATA default ../shared/data/ted-gl-en)
# Extra options are appended to the recipe (the last one wins), e.g. --max-steps 4000; give such a
# variant its own NAME (environment, default ted-gl-en) so it does not mix with the recipe's runs:
#   NAME=ted-gl-en-2400 experiments/ted_gl_en.sh ../shared/data/ted-gl-en --max-steps 2400
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
data=${1:-../shared/data/ted-gl-en}
[ $# -gt 0 ] && shift
# The recipe: the demo model (2+2 layers, d 256, 4 heads, FFN 1024), every dropout 0.2, 4,000
# joint subwords, 3,000-token batches, Adam lr 1.5e-3 after 300 warm-up steps, cosine decay to 0
# at 1,200 steps (about 9 epochs), dev BLEU on 150 sentences every 600 steps; the best dev
# checkpoint is tested. The two modes of a seed train side by side, one thread each.
PARALLEL=1 exec experiments/qknorm_vs_scaled_dot.sh "${NAME:-ted-gl-en}" "$data" gl en none \
  --preset demo --dropout 0.2 --vocab-size 4000 --batch-tokens 3000 --lr 1.5e-3 --warmup 300 \
  --schedule cosine --max-steps 1200 --max-minutes 0 --eval-every 600 --eval-sentences 150 \
  --patience 100 --threads 1 "$@"
