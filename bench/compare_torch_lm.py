#!/usr/bin/env python3
"""qkgrad against PyTorch: one training step of the same decoder-only language model, side by side.

    python3 bench/compare_torch.py lm [--rounds 3] [--steps 10] [--threads 2] [--attention scaled_dot,qknorm]
                                      [--layers 4 --d-model 192 --heads 3 --ffn 768 --batch 16 --context 128]
                                      [--qkgrad build/bench/qkgrad-bench-lm] [--json FILE]
    python3 bench/compare_torch.py lm-step [the same sizes] [--attention MODE]   (one PyTorch measurement)

Run it with Debian's Python and PyTorch (/usr/bin/python3; apt-get install python3-torch).
The step, in both (bench/bench_lm.cpp is qkgrad's): zero the gradients; logits = model(ids);
the cross-entropy of the next bytes (the mean over B·T); backward; clip the gradient norm to 1;
AdamW (lr 1e-3, betas 0.9 / 0.95, weight decay 0.1 on the weight matrices and the embedding, none
on the norms' gains and biases). Inputs are random bytes. The model: tools/qkgrad_torch_lm.py, the
sizes of qkgrad-lm's demo preset by default. Each contender runs --warmup-steps untimed then
--steps timed steps in a fresh process; the rounds alternate qkgrad and PyTorch, so drift of the
machine hits both alike. The figure is the median ms per step, then the median over the rounds.
The OpenBLAS rule: the PyTorch worker runs without OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (its
OpenBLAS detects the CPU itself); qkgrad keeps the inherited environment; the report says both.
Output: a Markdown table on stdout, one row per attention mode (tokens/s of each, the ratio
qkgrad ÷ PyTorch, peak RSS of each), progress on stderr. Exit status: 0, 1 a failed run, 2 usage.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPENBLAS_FORCING = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
SIZES = (("layers", 4), ("d-model", 192), ("heads", 3), ("ffn", 768), ("batch", 16), ("context", 128))


def size_parser(prog):
    parser = argparse.ArgumentParser(prog=prog)
    for name, default in SIZES:
        parser.add_argument("--" + name, type=int, default=default)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    return parser


def size_flags(o):
    flags = []
    for name, _ in SIZES + (("steps", 0), ("warmup-steps", 0), ("threads", 0)):
        flags += ["--" + name, str(getattr(o, name.replace("-", "_")))]
    return flags


def run_worker(argv):
    parser = size_parser("compare_torch.py lm-step")
    parser.add_argument("--attention", default="scaled_dot")
    o = parser.parse_args(argv)
    import resource

    import torch
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import qkgrad_torch_lm as lm

    torch.set_num_threads(o.threads)
    torch.manual_seed(0)
    model = lm.LanguageModel(o.layers, o.d_model, o.heads, o.ffn, o.attention, o.context)
    decay = [p for n, p in model.named_parameters() if not lm.no_decay(n)]
    rest = [p for n, p in model.named_parameters() if lm.no_decay(n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95))
    data = torch.randint(0, 256, (o.batch, o.context + 1))
    ids, targets = data[:, :-1].contiguous(), data[:, 1:].contiguous()

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(ids).reshape(-1, 256), targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    for _ in range(o.warmup_steps):
        step()
    ms = []
    for _ in range(o.steps):
        t0 = time.perf_counter()
        step()
        ms.append(1000 * (time.perf_counter() - t0))
    ms.sort()
    median = ms[len(ms) // 2]
    print(json.dumps({"framework": "torch", "torch": torch.__version__, "attention": o.attention, "threads": o.threads,
                      "parameters": sum(p.numel() for p in model.parameters()), "median_ms": median,
                      "tokens_per_s": o.batch * o.context / (median / 1000),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    return 0


def run_json(command, env):
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"exit status {done.returncode}: {' '.join(command)}\n{(done.stderr or done.stdout)[-1500:]}")
    return json.loads(lines[-1])


def main(argv):
    if argv and argv[0] == "lm-step":
        return run_worker(argv[1:])
    parser = size_parser("compare_torch.py lm")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--attention", default="scaled_dot,qknorm,rms_qknorm,layer_qknorm")
    parser.add_argument("--qkgrad", default=os.path.join(ROOT, "build/bench/qkgrad-bench-lm"))
    parser.add_argument("--json", metavar="FILE")
    o = parser.parse_args(argv)
    if not os.access(o.qkgrad, os.X_OK):
        print(f"compare_torch.py lm: {o.qkgrad} is missing: build it (ninja -C build bench/qkgrad-bench-lm)", file=sys.stderr)
        return 2
    torch_env = {k: v for k, v in os.environ.items() if k not in OPENBLAS_FORCING}
    forced = {k: os.environ[k] for k in OPENBLAS_FORCING if k in os.environ}
    results, failed = [], False
    modes = o.attention.split(",")
    for r in range(1, o.rounds + 1):
        for mode in modes:
            for name, command, env in (
                    ("qkgrad", [o.qkgrad, "--json", "--attention", mode] + size_flags(o), dict(os.environ)),
                    ("torch", [sys.executable, os.path.abspath(__file__), "lm-step", "--attention", mode] + size_flags(o), torch_env)):
                print(f"round {r}/{o.rounds}: {name} {mode} (load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
                try:
                    results.append(dict(run_json(command, env), contender=name, round=r, attention=mode))
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    print(f"failed: {e}", file=sys.stderr)
                    failed = True
    for mode in modes:  # the same model: the same number of parameters
        counts = {x["contender"]: x["parameters"] for x in results if x["attention"] == mode}
        if len(set(counts.values())) > 1:
            print(f"error: {mode}: the models differ in size: {counts}", file=sys.stderr)
            failed = True
    if o.json:
        with open(o.json, "w") as f:
            json.dump(results, f, indent=1)
    print(f"LM training step, {o.layers} blocks, d {o.d_model}, {o.heads} heads, ffn {o.ffn}, {o.batch} x {o.context} bytes, "
          f"{o.threads} threads, median of {o.rounds} rounds of {o.steps} steps; environment: "
          f"{', '.join(f'{k}={v}' for k, v in forced.items()) or 'no OpenBLAS settings'} (qkgrad), none (PyTorch)\n")
    print("| attention | qkgrad tokens/s | PyTorch tokens/s | qkgrad ÷ PyTorch | qkgrad peak RSS | PyTorch peak RSS |")
    print("|---|---:|---:|---:|---:|---:|")
    for mode in modes:
        pick = lambda who, key: statistics.median([x[key] for x in results if x["contender"] == who and x["attention"] == mode] or [float("nan")])
        q, t = pick("qkgrad", "tokens_per_s"), pick("torch", "tokens_per_s")
        print(f"| {mode} | {q:.0f} | {t:.0f} | {q / t:.2f} | {pick('qkgrad', 'peak_rss_mb'):.0f} MB | {pick('torch', 'peak_rss_mb'):.0f} MB |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
