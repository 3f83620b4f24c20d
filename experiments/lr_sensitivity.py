#!/usr/bin/env python3
"""The table and pictures of the learning-rate sensitivity study (experiments/lr_sensitivity.sh).

    python3 experiments/lr_sensitivity.py experiments/results/NAME [--out DIR]

Reads every record NAME/MODE-lrLR-seedS (outcome.json, metrics.jsonl) and writes, from them alone:
(into DIR instead with --out: scripts/test.sh regenerates them there and compares)
  experiments/results/NAME.md            per run: final validation loss, whether and when it
                                         diverged, each block's largest attention logit over training
                                         and the attention entropy at the end; per mode: Wortsman et
                                         al.'s LR sensitivity
  experiments/results/NAME-loss.svg      final validation loss against the learning rate (log axis),
                                         one curve per mode (mean over seeds)
  experiments/results/NAME-logits.svg    the largest attention logit against the step at the two
                                         highest learning rates, one curve per mode (seed 1)

LR sensitivity (Wortsman et al. 2023, section 3.1): the mean over the learning rates of
min(loss(lr), L0) - min over lr of loss(lr), the loss the mean over seeds, L0 the loss before
training: ln 256 (a uniform prediction of the next byte). A run that diverged (a non-finite loss)
counts at L0. The output depends only on the records, so scripts/test.sh can check the committed
table against them."""
import json
import math
import os
import re
import sys

MODES = ("scaled_dot", "qknorm", "rms_qknorm", "layer_qknorm")
COLOURS = {"scaled_dot": "#d62728", "qknorm": "#1f77b4", "rms_qknorm": "#2ca02c", "layer_qknorm": "#9467bd"}
L0 = math.log(256)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"error: {path}: {e}")


def read_jsonl(path):
    lines = []
    if not os.path.exists(path):
        sys.exit(f"error: {path}: no such file; every record holds outcome.json and metrics.jsonl (experiments/lr_sensitivity.sh)")
    with open(path) as f:
        for number, line in enumerate(f, 1):
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"error: {path}:{number}: not JSON ({e})")
    return lines


def read_run(record):
    """One run's numbers from its record."""
    outcome = read_json(os.path.join(record, "outcome.json"))
    metrics = read_jsonl(os.path.join(record, "metrics.jsonl"))
    dev = [m["dev_loss"] for m in metrics if "dev_loss" in m]
    logged = [m for m in metrics if "attn_max_logit" in m]
    blocks = sorted(logged[0]["attn_max_logit"]) if logged else []
    diverged = outcome.get("diverged_at_step")
    final = dev[-1] if dev and diverged is None else None
    losses = [(m["step"], m["train_loss"]) for m in metrics if "train_loss" in m]
    spike = None  # the first logged step whose loss rose back above L0, after it had been below
    for i, (step, loss) in enumerate(losses):
        if loss > L0 and any(earlier < L0 for _, earlier in losses[:i]):
            spike = step
            break
    return {
        "mode": outcome["mode"], "lr": float(outcome["lr"]), "seed": int(outcome["seed"]), "diverged": diverged,
        "spike": spike, "peak_loss": max((loss for _, loss in losses), default=None),
        "final_loss": final, "counted_loss": L0 if final is None else min(final, L0),
        "max_logit": [max(m["attn_max_logit"][b] for m in logged) for b in blocks],
        "entropy": [logged[-1]["attn_entropy"][b] for b in blocks] if logged else [],
        "logit_curve": [(m["step"], max(m["attn_max_logit"].values())) for m in logged],
    }


def sensitivity(runs, mode):
    """Wortsman's LR sensitivity of one mode, and its best learning rate and loss."""
    by_lr = {}
    for r in runs:
        if r["mode"] == mode:
            by_lr.setdefault(r["lr"], []).append(r["counted_loss"])
    if not by_lr:
        return None
    mean = {lr: sum(v) / len(v) for lr, v in by_lr.items()}
    best_lr = min(mean, key=mean.get)
    return sum(mean[lr] - mean[best_lr] for lr in mean) / len(mean), best_lr, mean[best_lr], mean


def fmt(x, digits=3):
    return "—" if x is None else f"{x:.{digits}f}"


def table(runs, name):
    out = [f"# Learning-rate sensitivity: {name}", "",
           "Written by `python3 experiments/lr_sensitivity.py experiments/results/" + name + "` from the records in",
           f"`experiments/results/{name}/` (experiments/lr_sensitivity.sh). L0 = ln 256 = {L0:.3f}.", "",
           "| mode | LR sensitivity | best lr | its loss | diverged runs | runs with a loss spike |",
           "|---|---:|---:|---:|---:|---:|"]
    for mode in MODES:
        s = sensitivity(runs, mode)
        if s is None:
            continue
        diverged = sum(1 for r in runs if r["mode"] == mode and r["diverged"] is not None)
        total = sum(1 for r in runs if r["mode"] == mode)
        spikes = sum(1 for r in runs if r["mode"] == mode and r["spike"] is not None)
        out.append(f"| {mode} | {s[0]:.3f} | {s[1]:g} | {s[2]:.3f} | {diverged} of {total} | {spikes} of {total} |")
    out += ["", "Per run: the final validation loss (nats per byte); the step at which the loss or a gradient",
            "turned non-finite (diverged: the run stopped there); a loss spike: the first logged step whose",
            "training loss (the mean of the last 10 steps) rose back above L0, the loss of no knowledge at",
            "all, after it had been below, and the highest training loss logged; each block's largest attention logit over training; each",
            "block's mean attention entropy (nats) at the last log line.", "",
            "| mode | lr | seed | final loss | diverged at | loss above L0 at | highest loss | largest logit per block | entropy per block |",
            "|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in sorted(runs, key=lambda r: (MODES.index(r["mode"]), r["lr"], r["seed"])):
        out.append(f"| {r['mode']} | {r['lr']:g} | {r['seed']} | {fmt(r['final_loss'])} | "
                   f"{'—' if r['diverged'] is None else r['diverged']} | {'—' if r['spike'] is None else r['spike']} | "
                   f"{fmt(r['peak_loss'], 2)} | {', '.join(f'{x:.1f}' for x in r['max_logit'])} | {', '.join(f'{x:.2f}' for x in r['entropy'])} |")
    return "\n".join(out) + "\n"


def svg_chart(title, x_label, y_label, series, log_x, log_y=False):
    """A line chart: series = [(label, colour, dash, [(x, y), ...])] (dash: an SVG stroke-dasharray or "")."""
    W, H, left, right, top, bottom = 720, 420, 70, 150, 40, 50
    xs = [x for *_, pts in series for x, _ in pts]
    ys = [y for *_, pts in series for _, y in pts]
    if not xs:
        xs, ys = [1, 10], [0, 1]
    tx = (lambda x: math.log10(x)) if log_x else (lambda x: x)
    x0, x1 = tx(min(xs)), tx(max(xs))
    ty = (lambda y: math.log10(max(y, 1e-3))) if log_y else (lambda y: y)
    if log_y:  # whole decades
        y0, y1 = math.floor(ty(min(ys))), max(math.ceil(ty(max(ys))), math.floor(ty(min(ys))) + 1)
    else:
        y0, y1 = min(0, min(ys)), max(ys) * 1.05 or 1
    x1 = x1 if x1 > x0 else x0 + 1
    px = lambda x: left + (tx(x) - x0) / (x1 - x0) * (W - left - right)
    py = lambda y: H - bottom - (ty(y) - y0) / (y1 - y0) * (H - top - bottom)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
             f'<rect width="{W}" height="{H}" fill="white"/>',
             f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
             f'<line x1="{left}" y1="{H - bottom}" x2="{W - right}" y2="{H - bottom}" stroke="black"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{H - bottom}" stroke="black"/>',
             f'<text x="{(left + W - right) / 2}" y="{H - 10}" text-anchor="middle">{x_label}</text>',
             f'<text x="15" y="{H / 2}" text-anchor="middle" transform="rotate(-90 15 {H / 2})">{y_label}</text>']
    ticks = sorted(set(xs)) if log_x else [min(xs) + i * (max(xs) - min(xs)) / 5 for i in range(6)]
    for x in ticks:
        parts.append(f'<text x="{px(x):.1f}" y="{H - bottom + 16}" text-anchor="middle">{x:g}</text>')
    for y in ([10.0 ** e for e in range(y0, y1 + 1)] if log_y else [y0 + i * (y1 - y0) / 5 for i in range(6)]):
        parts.append(f'<text x="{left - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:.3g}</text>')
        parts.append(f'<line x1="{left}" y1="{py(y):.1f}" x2="{W - right}" y2="{py(y):.1f}" stroke="#ddd"/>')
    for k, (label, colour, dash, pts) in enumerate(series):
        if pts:
            path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/>')
            parts += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>' for x, y in pts] if log_x else []
        parts.append(f'<rect x="{W - right + 10}" y="{top + 18 * k}" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{W - right + 28}" y="{top + 18 * k + 11}">{label}</text>')
    return "\n".join(parts + ["</svg>"]) + "\n"


def main():
    args = sys.argv[1:]
    if len(args) not in (1, 3) or (len(args) == 3 and args[1] != "--out"):
        sys.exit(__doc__)
    root = args[0].rstrip("/")
    name = os.path.basename(root)
    runs = [read_run(os.path.join(root, d)) for d in sorted(os.listdir(root))
            if re.fullmatch(r"[a-z_]+-lr[0-9.e+-]+-seed[0-9]+", d) and os.path.exists(os.path.join(root, d, "outcome.json"))]
    if not runs:
        sys.exit(f"error: {root} holds no records (MODE-lrLR-seedS/outcome.json); run experiments/lr_sensitivity.sh first")
    out_dir = args[2] if len(args) == 3 else os.path.dirname(root)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, name + ".md"), "w") as f:
        f.write(table(runs, name))
    loss_series = []
    for mode in MODES:
        s = sensitivity(runs, mode)
        if s:
            loss_series.append((mode, COLOURS[mode], "", sorted(s[3].items())))
    with open(os.path.join(out_dir, name + "-loss.svg"), "w") as f:
        f.write(svg_chart("final validation loss against the learning rate (diverged: ln 256)", "peak learning rate",
                          "loss (nats per byte)", loss_series, True))
    top = sorted({r["lr"] for r in runs})[-2:]
    logit_series = [(f"{r['mode']} lr {r['lr']:g}", COLOURS[r["mode"]], "" if r["lr"] == top[-1] else "6 3", r["logit_curve"])
                    for r in sorted(runs, key=lambda r: (r["lr"], MODES.index(r["mode"]))) if r["lr"] in top and r["seed"] == 1]
    with open(os.path.join(out_dir, name + "-logits.svg"), "w") as f:
        f.write(svg_chart(f"largest attention logit at learning rates {' and '.join(f'{lr:g}' for lr in top)} (seed 1)",
                          "step", "max |logit| over blocks (log scale)", logit_series, False, log_y=True))
    print(f"wrote {out_dir}/{name}.md, {name}-loss.svg and {name}-logits.svg from {len(runs)} runs")


if __name__ == "__main__":
    main()
