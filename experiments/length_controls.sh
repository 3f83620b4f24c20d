#!/usr/bin/env bash
# Decoding's length controls on a trained run (issue 44): dev BLEU, chrF, brevity penalty and
# length ratio for greedy decoding and a grid of beam-4 settings (--alpha × --word-penalty, and
# --beam-stop bound), the setting chosen on dev only (the best dev BLEU), then the test set
# decoded with the default (α 0.6, no word penalty) and with the chosen setting.
#
#   experiments/length_controls.sh NAME RUN DATA SRC TGT
#   Environment: DEV_LINES (default 400: the first N dev segments, as issue 44's measurements),
#   ALPHAS (default "0.6 1.0"), PENALTIES (default "0 -0.4 -0.8 -1.2 -1.6 -2.0"),
#   QKGRAD_TRANSLATE (the binary).
#
# Writes experiments/results/length-controls-NAME.md (the tables) and, beside it,
# length-controls-NAME.jsonl (one line per decoding: split, setting, BLEU and its n-gram
# precisions, chrF, BP, ratio). RUN's own dev.hyp and test.hyp are left as they were.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ $# -ne 5 ]; then
  echo "usage: experiments/length_controls.sh NAME RUN DATA SRC TGT" >&2
  exit 2
fi
name=$1 run=$2 data=$3 src=$4 tgt=$5
translate=${QKGRAD_TRANSLATE:-build/examples/qkgrad-translate}
dev_lines=${DEV_LINES:-400}
for f in "$translate" "$run/options.json" "$data/dev.$src" "$data/dev.$tgt" "$data/test.$src" "$data/test.$tgt"; do
  if [ ! -e "$f" ]; then
    echo "error: $f not found (build qkgrad-translate, train RUN on DATA first)" >&2
    exit 1
  fi
done
out=experiments/results/length-controls-$name
work=$(mktemp -d)
# eval writes RUN/SPLIT.hyp: the run's own dev.hyp and test.hyp are kept aside and put back.
mkdir "$work/kept"
for f in dev.hyp test.hyp; do if [ -f "$run/$f" ]; then cp -p "$run/$f" "$work/kept/"; fi; done
restore() {
  for f in dev.hyp test.hyp; do
    if [ -f "$work/kept/$f" ]; then cp -p "$work/kept/$f" "$run/$f"; else rm -f "$run/$f"; fi
  done
  rm -rf "$work"
}
trap restore EXIT
# The first DEV_LINES dev segments; the whole test set.
head -n "$dev_lines" "$data/dev.$src" >"$work/dev.$src"
head -n "$dev_lines" "$data/dev.$tgt" >"$work/dev.$tgt"
cp "$data/test.$src" "$data/test.$tgt" "$work/"
: >"$out.jsonl"

# decode SPLIT LABEL [eval flags...]: one line of $out.jsonl from eval's sacreBLEU text output.
decode() {
  local split=$1 label=$2
  shift 2
  echo "== $split: $label" >&2
  "$translate" eval --run "$run" --data "$work" --split "$split" --quiet "$@" >"$work/eval.txt"
  python3 - "$split" "$label" "$work/eval.txt" >>"$out.jsonl" <<'EOF'
import json, re, sys
split, label, path = sys.argv[1:]
text = open(path, encoding="utf-8").read()
bleu = re.search(r"^BLEU\|.* = ([0-9.]+) ([0-9./]+) \(BP = ([0-9.]+) ratio = ([0-9.]+)", text, re.M)
chrf = re.search(r"^chrF2\|.* = ([0-9.]+)", text, re.M)
if not bleu or not chrf:
    sys.exit(f"error: no BLEU/chrF line in eval's output:\n{text}")
print(json.dumps({"split": split, "setting": label, "bleu": float(bleu[1]), "chrf": float(chrf[1]),
                  "precisions": bleu[2], "bp": float(bleu[3]), "ratio": float(bleu[4])}))
EOF
}

decode dev "greedy" --beam 1
for alpha in ${ALPHAS:-0.6 1.0}; do
  for w in ${PENALTIES:-0 -0.4 -0.8 -1.2 -1.6 -2.0}; do
    decode dev "beam 4, α $alpha, word penalty $w" --beam 4 --alpha "$alpha" --word-penalty "$w"
  done
done
decode dev "beam 4, α 1.0, word penalty 0, bound" --beam 4 --alpha 1.0 --beam-stop bound

# The dev-best beam setting (highest BLEU; greedy excluded), as eval flags.
best=$(python3 - "$out.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
best = max((r for r in rows if r["setting"] != "greedy"), key=lambda r: (r["bleu"], r["bp"]))
print(best["setting"])
EOF
)
flags=$(python3 -c '
import re, sys
s = sys.argv[1]
m = re.match(r"beam 4, α ([0-9.]+), word penalty (-?[0-9.]+)(, bound)?$", s)
print(f"--beam 4 --alpha {m[1]} --word-penalty {m[2]}" + (" --beam-stop bound" if m[3] else ""))' "$best")
decode test "greedy" --beam 1
decode test "beam 4, α 0.6, word penalty 0 (the default)" --beam 4
# shellcheck disable=SC2086
decode test "$best (best on dev)" $flags

python3 - "$out.jsonl" "$name" "$run" "$dev_lines" >"$out.md" <<'EOF'
import json, sys
path, name, run, dev_lines = sys.argv[1:]
rows = [json.loads(l) for l in open(path, encoding="utf-8")]
print(f"# Length controls: {name}\n\nRun `{run}`, beam 4 unless greedy. Dev: the first {dev_lines} segments; "
      "the setting for test chosen by dev BLEU alone.\n")
for split in ("dev", "test"):
    print(f"## {split}\n\n| decoding | BLEU | n-gram precisions (1/2/3/4) | chrF | BP | ratio |\n"
          "|---|--:|--:|--:|--:|--:|")
    for r in rows:
        if r["split"] == split:
            print(f"| {r['setting']} | {r['bleu']:.2f} | {r['precisions']} | {r['chrf']:.2f} | {r['bp']:.3f} | "
                  f"{r['ratio']:.3f} |")
    print()
EOF
cat "$out.md"
