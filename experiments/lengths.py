#!/usr/bin/env python3
"""Where translations come out short: hypothesis / reference length by reference length.

    experiments/lengths.py REF HYP [HYP ...]

REF is the reference side of a test set, one segment a line (e.g. ../shared/data/ted-gl-en/test.en);
each HYP the translations of the same segments (a run's test.hyp, kept with its records by
experiments/qknorm_vs_scaled_dot.sh). Lengths are whitespace tokens, as BLEU with --tokenize none
counts them on pre-tokenised text. Prints a Markdown table: for each bucket of reference lengths,
the number of segments and each HYP's total length over the references' (BLEU's brevity penalty
is exp(1 − 1/ratio) when the whole test set's ratio is under 1), then the number of hypotheses
shorter than half their reference. Standard library only.
"""
import os
import sys

BUCKETS = ((0, 10), (10, 20), (20, 30), (30, 50), (50, None))  # reference lengths [lo, hi)


def read_lines(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except OSError as e:
        sys.exit(f"error: {path}: {e.strerror}")
    except UnicodeDecodeError as e:
        sys.exit(f"error: {path}: not UTF-8 text ({e})")


def bucket_name(lo, hi):
    return f"{lo}–{hi - 1}" if hi else f"{lo}+"


def table(ref, hyps, names):
    """The Markdown lines for REF's segments (token counts) and every HYP's (token counts)."""
    out = ["| reference length (tokens) | segments | " + " | ".join(names) + " |",
           "|---|--:|" + "--:|" * len(names)]
    for lo, hi in BUCKETS:
        idx = [i for i, r in enumerate(ref) if r >= lo and (hi is None or r < hi)]
        if not idx:
            continue
        ref_total = sum(ref[i] for i in idx)
        ratios = [f"{sum(h[i] for i in idx) / ref_total:.2f}" for h in hyps]
        out.append(f"| {bucket_name(lo, hi)} | {len(idx)} | " + " | ".join(ratios) + " |")
    ratios = [f"{sum(h) / max(sum(ref), 1):.2f}" for h in hyps]
    out.append(f"| all | {len(ref)} | " + " | ".join(ratios) + " |")
    halves = [str(sum(1 for r, n in zip(ref, h) if n < r / 2)) for h in hyps]
    out.append(f"| hypotheses under half their reference | | " + " | ".join(halves) + " |")
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    ref_lines = read_lines(sys.argv[1])
    ref = [len(line.split()) for line in ref_lines]
    hyps, names = [], []
    for path in sys.argv[2:]:
        lines = read_lines(path)
        if len(lines) != len(ref_lines):
            sys.exit(f"error: {path} has {len(lines)} lines but {sys.argv[1]} has {len(ref_lines)}: "
                     "a HYP must translate every segment of REF, in order")
        hyps.append([len(line.split()) for line in lines])
        names.append(os.path.basename(os.path.dirname(os.path.abspath(path))) or path)
    print("\n".join(table(ref, hyps, names)))


if __name__ == "__main__":
    main()
