#!/usr/bin/env bash
# The qkgrad demo. On a fresh Debian 12 machine (2 cores are enough):
#   1. installs what is missing (apt-get) and builds qkgrad (release);
#   2. builds the embedded Spanish->English corpus from Debian's Bible packages
#      (Reina-Valera 1909 and the World English Bible, aligned verse by verse);
#   3. trains a QKNorm Transformer with the `demo` preset (about 13 minutes of training);
#   4. translates the held-out test books and prints BLEU, chrF and a few example translations,
#      and draws the attention of every layer and head for one sentence.
# Extra arguments go to `qkgrad-translate train` (e.g. --attn scaled_dot, --max-minutes 30).
# Outputs: demo/bible-es-en (the corpus) and demo/run-* (the run: checkpoints, metrics, curves).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

ensure_packages diatheke sword-text-sparv sword-text-web
echo "== building qkgrad-translate (build/)"
configure build >/dev/null
ninja -C build examples/qkgrad-translate
translate=build/examples/qkgrad-translate

data=demo/bible-es-en
run=demo/run-qknorm
for arg in "$@"; do
  if [ "$arg" = "scaled_dot" ]; then run=demo/run-scaled_dot; fi
done

if [ ! -f "$data/test.en" ]; then
  echo "== preparing the Bible corpus ($data)"
  "$translate" prepare-bible --out "$data"
fi

if [ -f "$run/checkpoints/last/model.safetensors" ]; then
  echo "== $run is already trained (delete it to train again)"
else
  echo "== training ($run): QKNorm Transformer, demo preset"
  "$translate" train --data "$data" --src es --tgt en --run "$run" --preset demo "$@"
fi

echo "== test set (Daniel and Acts, never seen in training)"
"$translate" eval --run "$run" --split test --show 5

echo "== attention heatmaps"
"$translate" attention --run "$run" --text "En el principio era el Verbo, y el Verbo era con Dios." --out "$run/attention"

echo
echo "Curves (train/dev loss, dev BLEU, the QKNorm gains): $run/curves.svg"
echo "Metrics, one JSON object per line:                     $run/metrics.jsonl"
echo "Attention of every layer and head:                     $run/attention-{encoder,decoder,cross}.svg"
echo "Translate your own sentences: echo 'Dios es amor.' | $translate translate --run $run"
