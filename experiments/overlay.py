#!/usr/bin/env python3
"""Draws one metric of several runs on one set of axes, as SVG: the curves of two settings overlaid.

    python3 experiments/overlay.py [--metric dev_loss] [--title T] RECORD... > out.svg

Each RECORD is a run directory or a committed record (experiments/results/NAME/MODE-seedN) holding
metrics.jsonl; its label is NAME/MODE-seedN. The metric is any number metrics.jsonl logs: dev_loss,
dev_bleu, dev_chrf, dev_brevity_penalty, dev_length_ratio (one point per evaluation; the last two
only in runs trained since 2026-12-07) or train_loss (one per log line). Runs of the same NAME share
a colour; seeds differ by dash."""
import argparse
import html
import json
import os
import sys

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
DASHES = ("", "6 3", "2 2", "8 3 2 3")
W, H, LEFT, RIGHT, TOP, BOTTOM = 720, 420, 70, 190, 40, 50  # the picture and its margins, in pixels


def points(record, metric):
    """(step, value) of every metrics.jsonl line that logs the metric; a malformed line names its place."""
    path = os.path.join(record, "metrics.jsonl")
    if not os.path.exists(path):
        sys.exit(f"error: {path}: no such file; give a run directory or a record that holds metrics.jsonl")
    out = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                sys.exit(f"error: {path}:{number}: not a JSON line")
            value = entry.get(metric)
            if isinstance(value, (int, float)) and isinstance(entry.get("step"), int):
                out.append((entry["step"], float(value)))
    if not out:
        sys.exit(f"error: {path}: logs no '{metric}'; try dev_loss, dev_bleu, dev_chrf or train_loss")
    return out


def svg(series, metric, title):
    """The SVG text: axes with 5 ticks each, one polyline and one legend line per run."""
    xs = [s for _, pts in series for s, _ in pts]
    ys = [v for _, pts in series for _, v in pts]
    x0, x1 = 0, max(xs)
    y0, y1 = min(ys), max(ys)
    pad = (y1 - y0) * 0.05 or 1.0
    y0, y1 = y0 - pad, y1 + pad
    px = lambda s: LEFT + (s - x0) / (x1 - x0) * (W - LEFT - RIGHT)
    py = lambda v: H - BOTTOM - (v - y0) / (y1 - y0) * (H - TOP - BOTTOM)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">{html.escape(title)}</text>',
           f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 12}" text-anchor="middle">step</text>',
           f'<text x="16" y="{(TOP + H - BOTTOM) / 2}" text-anchor="middle" '
           f'transform="rotate(-90 16 {(TOP + H - BOTTOM) / 2})">{html.escape(metric)}</text>',
           f'<rect x="{LEFT}" y="{TOP}" width="{W - LEFT - RIGHT}" height="{H - TOP - BOTTOM}" fill="none" stroke="#888"/>']
    for i in range(5):
        s, v = x0 + (x1 - x0) * i / 4, y0 + (y1 - y0) * i / 4
        out.append(f'<text x="{px(s):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{s:,.0f}</text>')
        out.append(f'<text x="{LEFT - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:.3g}</text>')
    names = list(dict.fromkeys(label.split("/")[0] for label, _ in series))
    for i, (label, pts) in enumerate(series):
        colour = COLOURS[names.index(label.split("/")[0]) % len(COLOURS)]
        dash = DASHES[sum(1 for l, _ in series[:i] if l.split("/")[0] == label.split("/")[0]) % len(DASHES)]
        line = " ".join(f"{px(s):.1f},{py(v):.1f}" for s, v in pts)
        style = f'stroke="{colour}" stroke-width="1.8" fill="none"' + (f' stroke-dasharray="{dash}"' if dash else "")
        out.append(f'<polyline points="{line}" {style}/>')
        ly = TOP + 14 + 18 * i
        out.append(f'<line x1="{W - RIGHT + 12}" y1="{ly - 4}" x2="{W - RIGHT + 40}" y2="{ly - 4}" {style}/>')
        out.append(f'<text x="{W - RIGHT + 46}" y="{ly}">{html.escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("records", nargs="+", help="run directories or records holding metrics.jsonl")
    parser.add_argument("--metric", default="dev_loss")
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    series = []
    for record in args.records:
        path = os.path.normpath(record)
        label = f"{os.path.basename(os.path.dirname(path))}/{os.path.basename(path)}"
        series.append((label, points(path, args.metric)))
    if max(s for _, pts in series for s, _ in pts) <= 0:
        sys.exit("error: every point is at step 0; nothing to draw")
    sys.stdout.write(svg(series, args.metric, args.title or f"{args.metric} by step"))


if __name__ == "__main__":
    main()
