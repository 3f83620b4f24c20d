#!/usr/bin/env python3
"""Why translations come out short, measured on a corpus and, optionally, a trained run (issue 44).

    experiments/segment_lengths.py DATA SRC TGT [RUN [HYP]]

The corpus alone (Moses-tokenised, one segment per line):
  - the share of segments of several sentences (a sentence ends with a token . ? ! or ... that
    is not the segment's last), per split;
  - the target/source length ratio in words per split, and the share of training pairs over
    79 and 250 words on either side (a length limit in subwords drops more);
With RUN (a qkgrad-translate run directory), on the test segments whose reference has two or
more sentences: the model's log P of the reference cut after its first sentence against log P
of the whole reference (`qkgrad-translate score`: teacher-forced, each with its end of
sentence), raw (alpha 0) and divided by the beam's length penalty ((5 + L) / 6)^alpha at alpha
0.6 and 1.0, L the subwords + 1. Where the cut reference scores higher, beam search prefers to
stop after the first sentence: this tells a model that ends segments early from a search that
does. With HYP (the run's test translations), the share of those segments whose translation
has fewer sentences than the reference, and, over every translation shorter than its reference,
how often the model scores it above the reference (then the model, not the search, prefers the
short output: Stahlberg and Byrne 2019's model errors against search errors).
Prints markdown tables. QKGRAD_TRANSLATE names the binary (default build/examples/qkgrad-translate).
"""
import os
import subprocess
import sys
import tempfile

ENDS = {".", "?", "!", "..."}


def sentences(line):
    """The sentences of a tokenised segment: split after each . ? ! that is not the last token
    (a closing quote right after it stays with its sentence)."""
    tokens = line.split()
    out, current = [], []
    for i, tok in enumerate(tokens):
        current.append(tok)
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if tok in ENDS and nxt is not None and nxt not in ("&quot;", "&apos;", '"', "'", ")"):
            out.append(current)
            current = []
    if current:
        out.append(current)
    return [" ".join(s) for s in out]


def read(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def corpus_tables(data, src, tgt):
    print("| split | segments | of 2+ sentences | target/source words | target words per segment |")
    print("|---|--:|--:|--:|--:|")
    for split in ("train", "dev", "test"):
        s, t = read(f"{data}/{split}.{src}"), read(f"{data}/{split}.{tgt}")
        multi = sum(len(sentences(line)) > 1 for line in t)
        sw, tw = sum(len(x.split()) for x in s), sum(len(x.split()) for x in t)
        print(f"| {split} | {len(t)} | {100 * multi / len(t):.1f}% | {tw / sw:.3f} | {tw / len(t):.1f} |")
    s, t = read(f"{data}/train.{src}"), read(f"{data}/train.{tgt}")
    longest = [max(len(a.split()), len(b.split())) for a, b in zip(s, t)]
    print()
    print("| training pairs whose longer side has more than | 79 words | 250 words |")
    print("|---|--:|--:|")
    over = [sum(n > limit for n in longest) for limit in (79, 250)]
    print(f"| pairs | {100 * over[0] / len(t):.1f}% ({over[0]}) | {100 * over[1] / len(t):.1f}% ({over[1]}) |")
    print()


def score(run, src_lines, tgt_lines, normalize):
    exe = os.environ.get("QKGRAD_TRANSLATE", "build/examples/qkgrad-translate")
    with tempfile.TemporaryDirectory() as work:
        with open(f"{work}/s", "w", encoding="utf-8") as f:
            f.write("\n".join(src_lines) + "\n")
        with open(f"{work}/t", "w", encoding="utf-8") as f:
            f.write("\n".join(tgt_lines) + "\n")
        cmd = [exe, "score", "--run", run, "--src", f"{work}/s", "--tgt", f"{work}/t"]
        if normalize:
            cmd.append("--normalize")
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [float(x) for x in out.split()]


def beam_scores(raw, per_token, alpha):
    """Each log P divided by the beam's length penalty ((5 + L) / 6)^alpha, L = log P / (log P per
    token): the subwords + 1, as `score` and `score --normalize` give them."""
    return [r / ((5 + r / p) / 6) ** alpha for r, p in zip(raw, per_token)]


def model_tables(data, src, tgt, run, hyp):
    s, t = read(f"{data}/test.{src}"), read(f"{data}/test.{tgt}")
    picked = [i for i, line in enumerate(t) if len(sentences(line)) > 1]
    srcs = [s[i] for i in picked]
    full = [t[i] for i in picked]
    first = [sentences(t[i])[0] for i in picked]
    raw_full, raw_first = score(run, srcs, full, False), score(run, srcs, first, False)
    per_full, per_first = score(run, srcs, full, True), score(run, srcs, first, True)
    n = len(picked)
    print(f"Test segments whose reference has 2+ sentences: {n} of {len(t)}.")
    print()
    print("| score compared | the first sentence alone scores higher | mean log P, first sentence | mean log P, whole |")
    print("|---|--:|--:|--:|")
    for alpha in (0.0, 0.6, 1.0):
        a, b = beam_scores(raw_first, per_first, alpha), beam_scores(raw_full, per_full, alpha)
        wins = sum(x > y for x, y in zip(a, b))
        label = "log P (alpha 0)" if alpha == 0 else f"log P / lp, alpha {alpha}"
        print(f"| {label} | {100 * wins / n:.1f}% ({wins}) | {sum(a) / n:.2f} | {sum(b) / n:.2f} |")
    print()
    if hyp:
        h = read(hyp)
        fewer = sum(len(sentences(h[i])) < len(sentences(t[i])) for i in picked)
        hw = sum(len(h[i].split()) for i in picked)
        rw = sum(len(t[i].split()) for i in picked)
        single = [i for i in range(len(t)) if len(sentences(t[i])) == 1]
        hw1 = sum(len(h[i].split()) for i in single)
        rw1 = sum(len(t[i].split()) for i in single)
        print("| test segments | translations with fewer sentences than the reference | hypothesis/reference words |")
        print("|---|--:|--:|")
        print(f"| reference of 2+ sentences ({n}) | {100 * fewer / n:.1f}% ({fewer}) | {hw / rw:.3f} |")
        print(f"| reference of 1 sentence ({len(single)}) | | {hw1 / rw1:.3f} |")
        print()
        # Model error or search error (Stahlberg and Byrne 2019): where the translation is shorter
        # than the reference, does the model score it above the reference under the beam's
        # criterion? If so, a better search would not lengthen it: the model prefers it.
        shorter = [i for i in range(len(t)) if len(h[i].split()) < len(t[i].split())]
        hs, rs = [s[i] for i in shorter], [h[i] for i in shorter]
        raw_h, per_h = score(run, hs, rs, False), score(run, hs, rs, True)
        raw_r, per_r = score(run, hs, [t[i] for i in shorter], False), score(run, hs, [t[i] for i in shorter], True)
        print(f"Test translations shorter than their reference: {len(shorter)} of {len(t)}.")
        print()
        print("| score compared | the model scores the shorter translation above the reference |")
        print("|---|--:|")
        for alpha in (0.0, 0.6, 1.0):
            wins = sum(x > y for x, y in zip(beam_scores(raw_h, per_h, alpha), beam_scores(raw_r, per_r, alpha)))
            label = "log P (alpha 0)" if alpha == 0 else f"log P / lp, alpha {alpha}"
            print(f"| {label} | {100 * wins / len(shorter):.1f}% ({wins}) |")
        print()


def main():
    if len(sys.argv) not in (4, 5, 6):
        sys.exit(__doc__)
    data, src, tgt = sys.argv[1:4]
    corpus_tables(data, src, tgt)
    if len(sys.argv) >= 5:
        model_tables(data, src, tgt, sys.argv[4], sys.argv[5] if len(sys.argv) == 6 else None)


if __name__ == "__main__":
    main()
