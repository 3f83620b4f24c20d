#!/usr/bin/env python3
"""Writes the results table of one experiment (experiments/qknorm_vs_scaled_dot.sh) as Markdown.

    python3 experiments/summarize.py ROOT NAME [RUNS] > experiments/results/NAME.md

ROOT holds one directory MODE-seedN per finished run: experiments/results/NAME (the committed
records qknorm_vs_scaled_dot.sh copies there) or experiments/runs/NAME (the run directories).
Reads from each: test.json (test BLEU, chrF), metrics.jsonl (dev BLEU per evaluation, the
learned gains over training, elapsed time) and attention-stats.jsonl (entropy / max probability /
saturation per attention module on the test set, teacher-forced). A record whose metrics.jsonl
was lost holds summary.json instead: the numbers this script derived from it, as written at the
time (its PROVENANCE file says from where). RUNS (default experiments/runs/NAME): the run
directories, named in the table as where the heatmaps are. The output depends only on the
records, so scripts/test.sh checks that every committed table is what its records give."""
import json
import math
import os
import re
import statistics
import sys


MODES = ("qknorm", "scaled_dot", "rms_qknorm", "layer_qknorm")  # ops/attention.h's attention modes
HEATMAPS = "1–3"  # qknorm_vs_scaled_dot.sh's default HEATMAPS


def read_json(path):
    """One JSON object from a file; a malformed one ends the program naming the file."""
    try:
        with open(path) as f:
            value = json.load(f)
    except json.JSONDecodeError as e:
        sys.exit(f"error: {path}: not JSON ({e}); restore it from git or from the run directory")
    if not isinstance(value, dict):
        sys.exit(f"error: {path}: not a JSON object")
    return value


def read_jsonl(path):
    """One JSON object a line; a malformed line ends the program naming the file and the line."""
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"error: {path}:{number}: not a JSON line ({e})")
            if not isinstance(rows[-1], dict):
                sys.exit(f"error: {path}:{number}: not a JSON object")
    return rows


def load_run(path):
    run = {"path": path}
    test_path = os.path.join(path, "test.json")
    run.update(read_json(test_path))
    for key in ("bleu", "chrf"):
        if not isinstance(run.get(key), (int, float)):
            sys.exit(f"error: {test_path}: has no number '{key}' (qknorm_vs_scaled_dot.sh writes "
                     '{"bleu": B, "chrf": C} after the test decode)')
    stats_path = os.path.join(path, "attention-stats.jsonl")
    run["attention"] = read_jsonl(stats_path) if os.path.exists(stats_path) else []
    summary_path = os.path.join(path, "summary.json")
    if not os.path.exists(os.path.join(path, "metrics.jsonl")) and os.path.exists(summary_path):
        run.update(read_json(summary_path))
        return run
    metrics = read_jsonl(os.path.join(path, "metrics.jsonl"))
    evals = [m for m in metrics if "dev_bleu" in m]
    logs = [m for m in metrics if "train_loss" in m]
    run["best_dev_bleu"] = max((m["dev_bleu"] for m in evals), default=float("nan"))
    run["evals"] = [(m["step"], m["dev_bleu"]) for m in evals]
    # Where it converged: the epoch of the best dev BLEU (the first such evaluation, as the
    # trainer keeps the first best), from the nearest log line at or before its step.
    best_step = next((m["step"] for m in evals if m["dev_bleu"] == run["best_dev_bleu"]), None)
    epochs = [m for m in logs if "epoch" in m and best_step is not None and m["step"] <= best_step]
    run["best_epoch"] = epochs[-1]["epoch"] if epochs else None
    run["steps"] = max((m["step"] for m in metrics if "step" in m), default=0)
    run["elapsed_s"] = max((m["elapsed_s"] for m in metrics if "elapsed_s" in m), default=0.0)
    run["g_first"] = logs[0].get("g", {}) if logs else {}
    run["g_first_step"] = logs[0]["step"] if logs else None
    run["g_last"] = logs[-1].get("g", {}) if logs else {}
    return run


def brevity_penalty(run):
    """BLEU's brevity penalty from the stored score line ("... (BP = 0.889 ratio = ..."), or None."""
    m = re.search(r"\(BP = ([0-9.]+)", run.get("bleu_line", ""))
    return float(m.group(1)) if m else None


def mean_sd(values):
    if not values:
        return float("nan"), float("nan")
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else float("nan"))


def fmt(x, digits=2):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def main(root, name, runs_root):
    runs = {}
    for entry in sorted(os.listdir(root)):
        m = re.fullmatch(r"(" + "|".join(MODES) + r")-seed(\d+)", entry)
        if m and os.path.exists(os.path.join(root, entry, "test.json")):
            runs.setdefault(m.group(1), []).append((int(m.group(2)), load_run(os.path.join(root, entry))))
    if not runs:
        sys.exit(f"error: no finished runs (MODE-seedN/test.json) under {root}")
    present = [m for m in MODES if m in runs]
    out = [f"# {name}: " + ", ".join(present) + " attention\n"]
    out.append("## Test set (best dev checkpoint, beam 4, α 0.6)\n")
    # BLEU re-tokenised as 13a: recorded for pre-tokenised corpora since 2026-12-07 (the column
    # appears only where a run has it; see docs/results.md on the paper's BLEU script).
    retokenised = any("bleu_13a" in r for mode in present for _, r in runs[mode])
    out.append("| attention | seed | test BLEU | BP |" + (" BLEU, 13a re-tokenised |" if retokenised else "") +
               " chrF | best dev BLEU | at epoch | steps | training time |")
    out.append("|---|--:|--:|--:|" + ("--:|" if retokenised else "") + "--:|--:|--:|--:|--:|")
    for mode in present:
        for seed, r in sorted(runs.get(mode, [])):
            out.append(f"| {mode} | {seed} | {fmt(r['bleu'])} | {fmt(brevity_penalty(r), 3)} | " +
                       (f"{fmt(r.get('bleu_13a'))} | " if retokenised else "") +
                       f"{fmt(r['chrf'], 1)} | {fmt(r['best_dev_bleu'])} | "
                       f"{r['best_epoch'] if r['best_epoch'] is not None else 'n/a'} | {r['steps']} | "
                       f"{r['elapsed_s'] / 60:.0f} min |")
    out.append("")
    summary = {}
    for mode in present:
        bleus = [r["bleu"] for _, r in runs.get(mode, [])]
        chrfs = [r["chrf"] for _, r in runs.get(mode, [])]
        summary[mode] = (mean_sd(bleus), mean_sd(chrfs), bleus)
    out.append("| attention | runs | test BLEU mean ± sd (min–max) | chrF mean ± sd |")
    out.append("|---|--:|--:|--:|")
    for mode, ((bm, bs), (cm, cs), bleus) in summary.items():
        if len(bleus) == 1:  # one run: no spread to show
            out.append(f"| {mode} | 1 | {fmt(bm)} | {fmt(cm, 1)} |")
        elif bleus:
            out.append(f"| {mode} | {len(bleus)} | {fmt(bm)} ± {fmt(bs)} ({fmt(min(bleus))}–{fmt(max(bleus))}) | "
                       f"{fmt(cm, 1)} ± {fmt(cs, 1)} |")
    out.append("")
    if "qknorm" in summary and "scaled_dot" in summary:
        out.append(qknorm_verdict(summary["qknorm"][2], summary["scaled_dot"][2]))
    for mode in ("rms_qknorm", "layer_qknorm"):
        if mode in summary and "scaled_dot" in summary:
            out.append(f"{mode} − scaled dot: {summary[mode][0][0] - summary['scaled_dot'][0][0]:+.2f} BLEU "
                       f"({len(summary[mode][2])} run{'s' if len(summary[mode][2]) > 1 else ''}).\n")
    dev_by_step_table(out, runs, present)
    for mode in ("qknorm", "rms_qknorm", "layer_qknorm"):
        gain_table(out, mode, [r for _, r in runs.get(mode, [])])
    attention_table(out, runs, present)
    out.append("## Heatmaps\n")
    out.append(f"Test sentences {HEATMAPS}, every layer and head: `{runs_root}/MODE-seedN/heatmap-K-{{encoder,decoder,cross}}.svg` "
               "in each run directory (not committed; drawn again by `qkgrad-translate attention --run RUN`).")
    print("\n".join(out))


def qknorm_verdict(q, s):
    """One sentence on QKNorm − scaled dot from the test BLEU of each mode's runs (q, s: lists)."""
    diff = sum(q) / len(q) - sum(s) / len(s)
    if len(q) == 1 and len(s) == 1:
        return (f"Difference (QKNorm − scaled dot): **{diff:+.2f} BLEU**, one run of each: no spread between seeds "
                "is measured here, so this alone cannot tell the difference from seed noise.\n")
    spread = max(max(b) - min(b) for b in (q, s))
    if min(q) > max(s):
        verdict = "every QKNorm run scores above every scaled dot-product run"
    elif min(s) > max(q):
        verdict = "every scaled dot-product run scores above every QKNorm run"
    else:
        verdict = "the two modes' ranges overlap: the difference is within seed noise"
    return (f"Difference of the means (QKNorm − scaled dot): **{diff:+.2f} BLEU**; the largest spread between "
            f"seeds of one mode is {spread:.2f} BLEU; {verdict}.\n")


def column_steps(rows, most=8):
    """The steps of the by-step table: the evaluations' own steps when there are at most `most` of them,
    else every 4,000 steps (or a coarser round step where that would give too many columns)."""
    evaluated = sorted({t for _, _, r in rows for t, _ in r["evals"]})
    if len(evaluated) <= most:
        return evaluated
    last = evaluated[-1]
    every = next((e for e in (4000, 8000, 10000, 20000, 40000) if last // e <= 2 * most), -(-last // most))
    return list(range(every, last + 1, every))


def dev_by_step_table(out, runs, present):
    """The best dev BLEU each run had reached by step S: runs of unequal length compared at equal steps."""
    rows = [(mode, seed, r) for mode in present for seed, r in sorted(runs[mode]) if r.get("evals")]
    if not rows:
        return
    steps = column_steps(rows)
    out.append("## Best dev BLEU by step (runs of unequal length at equal steps)\n")
    out.append("| attention | seed | " + " | ".join(f"{s:,}" for s in steps) + " |")
    out.append("|---|--:|" + "--:|" * len(steps))
    for mode, seed, r in rows:
        cells = []
        for s in steps:
            if r["evals"][-1][0] >= s:
                cells.append(f"{max(b for t, b in r['evals'] if t <= s):.2f}")
            else:
                cells.append("")
        out.append(f"| {mode} | {seed} | " + " | ".join(cells) + " |")
    out.append("\nBest dev BLEU (300 dev sentences) over the evaluations at or before each step; empty once "
               "a run had stopped. Runs whose metrics.jsonl was lost are not listed.\n")


def gain_table(out, mode, q):
    """The learned gains per module: QKNorm's g, or the mean of each q_norm / k_norm γ."""
    if q:
        what = "The QKNorm gain g" if mode == "qknorm" else f"The {mode} gains (mean of each γ over its dimensions)"
        over = "mean over seeds" if len(q) > 1 else "1 run"
        out.append(f"## {what} of every attention module ({over})\n")
        modules = sorted(q[0]["g_last"])
        sym = "g" if mode == "qknorm" else "mean γ"
        out.append(f"| module | {sym} at the first log line (step {q[0]['g_first_step']}) | {sym} at the end |")
        out.append("|---|--:|--:|")
        for mod in modules:
            first = statistics.mean(r["g_first"].get(mod, float("nan")) for r in q)
            last = statistics.mean(r["g_last"].get(mod, float("nan")) for r in q)
            out.append(f"| {mod} | {first:.2f} | {last:.2f} |")
        out.append("\nThe whole curves are in each run's metrics.jsonl (`g`) and curves.svg"
                   + ("." if mode == "qknorm" else "; each run's gains.txt has γ_q ⊙ γ_k (and β) per module, "
                      "from its best checkpoint (experiments/gains.py).") + "\n")


def attention_table(out, runs, present):
    out.append("## Attention on the test set (teacher-forced; mean over seeds)\n")
    out.append("Entropy in nats; normalised entropy = entropy / ln(visible keys) (1 = uniform); saturated = rows whose "
               "largest probability is ≥ 0.9.\n")
    out.append("| module | attention | entropy | normalised | max prob | saturated |")
    out.append("|---|---|--:|--:|--:|--:|")
    modules = []
    for mode in present:
        for _, r in runs.get(mode, []):
            for s in r["attention"]:
                if s["module"] not in modules:
                    modules.append(s["module"])
    for mod in modules:
        for mode in present:
            rows = [s for _, r in runs.get(mode, []) for s in r["attention"] if s["module"] == mod]
            if not rows:
                continue
            avg = lambda key: statistics.mean(s[key] for s in rows)  # noqa: E731
            out.append(f"| {mod} | {mode} | {avg('mean_entropy'):.3f} | {avg('mean_norm_entropy'):.3f} | "
                       f"{avg('mean_max_prob'):.3f} | {100 * avg('saturated_fraction'):.1f}% |")
    out.append("")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else f"experiments/runs/{sys.argv[2]}")
