#!/usr/bin/env python3
"""The fused attention op on the GPU against PyTorch's, forward and forward + backward, by length.

    python3 bench/gpu_attention.py [--qkgrad build-gpu/bench/qkgrad-bench-attention]
        [--batch 16] [--heads 8] [--head-dim 64] [--lengths 64,128,256,512,1024]
        [--modes qknorm,scaled_dot] [--reps 20] [--jsonl FILE]

For every mode, length T and masking (causal or not), on the same inputs q, k, v [B, T, H·d]
(heads side by side in the last dim, as the model's projections make them) and a seed ȳ of ones:
  - qkgrad: `qkgrad-bench-attention --device cuda --json` (a fresh process per T), its fused
    kernel and the same math composed from qkgrad's primitive ops (attention_reference);
  - PyTorch: scaled_dot is torch.nn.functional.scaled_dot_product_attention (PyTorch chooses the
    kernel: for float32 its memory-efficient one, as flash attention takes 16-bit inputs only);
    qknorm is the best composition PyTorch offers: q̂ = g · normalize(q), k̂ = normalize(k), then
    scaled_dot_product_attention(q̂, k̂, v, scale=1) (g is a tensor that receives its gradient).
Both are timed the same way: wall clock around one call, ended by waiting for the GPU (qkgrad
copies one element of the result to the host, PyTorch calls torch.cuda.synchronize()), the median
of --reps repetitions after warm-up. Memory is the peak of bytes handed to tensors during forward
+ backward above what was in use before it (qkgrad's caching allocator, torch.cuda's
max_memory_allocated), gradients included. Everything is float32; TF32 plays no part (no matrix
product here goes through cuBLAS in either program, but PyTorch's settings are printed).

Prints a Markdown table on stdout (progress on stderr) and appends every raw result to --jsonl.
Exit status: 0, 1 when a run failed, 2 for a usage error or a missing program.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time


def positive_list(text):
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 2:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers >= 2, got '{text}'")
    return values


def log(message):
    print(message, file=sys.stderr, flush=True)


def run_qkgrad(o, mode, t):
    """qkgrad-bench-attention on the GPU for one mode and length: {causal: result}."""
    command = [o.qkgrad, "--json", "--device", "cuda", "--mode", mode, "--reps", str(o.reps),
               "--shape", f"{o.batch},{o.heads},{t},{o.head_dim}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=o.timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: exit status {done.returncode}: {done.stderr.strip()[-400:]}")
    results = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            results[bool(r["causal"])] = r
    if set(results) != {False, True}:
        raise RuntimeError(f"{' '.join(command)}: expected two JSON lines, got: {done.stdout[-400:]}")
    return results


class TorchAttention:
    """PyTorch's attention on the GPU, timed as qkgrad-bench-attention times qkgrad's."""

    def __init__(self, torch, o):
        self.torch, self.o = torch, o
        self.F = torch.nn.functional

    def inputs(self, t):
        torch, o = self.torch, self.o
        gen = torch.Generator(device="cuda").manual_seed(1)
        shape = (o.batch, t, o.heads * o.head_dim)  # [B, T, H·d]
        q, k, v = (torch.randn(shape, device="cuda", generator=gen).requires_grad_() for _ in range(3))
        g = torch.tensor(math.log2(t * t - t), device="cuda", requires_grad=True)  # the paper's g₀
        seed = torch.ones(shape, device="cuda")
        return q, k, v, g, seed

    def attention(self, mode, causal, q, k, v, g):
        o, F = self.o, self.F
        b, t = q.shape[0], q.shape[1]
        heads = lambda x: x.view(b, t, o.heads, o.head_dim).transpose(1, 2)  # noqa: E731  [B, H, T, d]
        qh, kh, vh = heads(q), heads(k), heads(v)
        if mode == "qknorm":
            qh = F.normalize(qh, dim=-1) * g  # g · q̂
            kh = F.normalize(kh, dim=-1)      # k̂
            out = F.scaled_dot_product_attention(qh, kh, vh, is_causal=causal, scale=1.0)
        else:
            out = F.scaled_dot_product_attention(qh, kh, vh, is_causal=causal)  # scale 1/√d
        return out.transpose(1, 2).reshape(b, t, o.heads * o.head_dim)  # [B, T, H·d]

    def time(self, mode, causal, t):
        torch = self.torch
        q, k, v, g, seed = self.inputs(t)
        sync = torch.cuda.synchronize
        forward, train, memory = [], [], []
        for r in range(self.o.reps + 3):  # three warm-up repetitions, dropped
            sync()
            t0 = time.perf_counter()
            with torch.no_grad():
                self.attention(mode, causal, q, k, v, g)
            sync()
            f = (time.perf_counter() - t0) * 1000.0
            for x in (q, k, v, g):
                x.grad = None
            sync()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            t0 = time.perf_counter()
            self.attention(mode, causal, q, k, v, g).backward(seed)
            sync()
            fb = (time.perf_counter() - t0) * 1000.0
            mb = (torch.cuda.max_memory_allocated() - before) / (1 << 20)
            if r >= 3:
                forward.append(f)
                train.append(fb)
                memory.append(mb)
        return {"framework": "torch", "mode": mode, "causal": causal, "b": self.o.batch, "h": self.o.heads, "t": t,
                "d": self.o.head_dim, "forward_ms": statistics.median(forward), "train_ms": statistics.median(train),
                "train_ms_min": min(train), "train_ms_max": max(train), "peak_mb": statistics.median(memory)}


def sdpa_backends(torch):
    """Which of PyTorch's attention kernels are enabled (PyTorch picks among them per call)."""
    cuda = torch.backends.cuda
    names = {"flash": "flash_sdp_enabled", "memory-efficient": "mem_efficient_sdp_enabled",
             "cudnn": "cudnn_sdp_enabled", "math": "math_sdp_enabled"}
    return [name for name, attr in names.items() if getattr(cuda, attr, lambda: False)()]


def table(o, rows, torch, gpu):
    lines = [f"# Fused attention on the GPU: qkgrad against PyTorch {torch.__version__}\n",
             f"{gpu}, PyTorch's CUDA {torch.version.cuda}; B {o.batch}, H {o.heads}, d {o.head_dim}, float32; "
             f"each the median of {o.reps} repetitions; memory = peak MB allocated above the inputs during forward + "
             f"backward (gradients included). PyTorch's scaled_dot_product_attention may choose among: "
             f"{', '.join(sdpa_backends(torch))}.\n",
             "| mode | causal | T | qkgrad fused f+b ms | qkgrad composed | PyTorch f+b ms | PyTorch ÷ qkgrad "
             "| fwd ms qkgrad / PyTorch | MB qkgrad / composed / PyTorch |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    for (mode, causal, t), (q, p) in rows.items():
        lines.append(f"| {mode} | {'yes' if causal else 'no'} | {t} | {q['train_ms']:.3f} | "
                     f"{q['train_ms_composed']:.3f} | {p['train_ms']:.3f} | {p['train_ms'] / q['train_ms']:.2f}× | "
                     f"{q['forward_ms']:.3f} / {p['forward_ms']:.3f} | "
                     f"{q['peak_mb']:.1f} / {q['peak_mb_composed']:.1f} / {p['peak_mb']:.1f} |")
    return "\n".join(lines)


def main(argv):
    parser = argparse.ArgumentParser(prog="gpu_attention.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--qkgrad", default="build-gpu/bench/qkgrad-bench-attention", metavar="PATH")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--lengths", type=positive_list, default=[64, 128, 256, 512, 1024])
    parser.add_argument("--modes", default="qknorm,scaled_dot")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--timeout", type=int, default=120, help="seconds per qkgrad run")
    parser.add_argument("--jsonl", metavar="FILE")
    o = parser.parse_args(argv)
    modes = [m.strip() for m in o.modes.split(",") if m.strip()]
    if not modes or any(m not in ("qknorm", "scaled_dot") for m in modes):
        parser.error(f"--modes: choose from qknorm, scaled_dot, got '{o.modes}'")
    if min(o.batch, o.heads, o.head_dim, o.reps) < 1:
        parser.error("--batch, --heads, --head-dim and --reps must be positive")
    if not (os.path.isfile(o.qkgrad) and os.access(o.qkgrad, os.X_OK)):
        print(f"gpu_attention.py: error: no qkgrad-bench-attention at '{o.qkgrad}' (a -Dcuda=true build: "
              "ninja -C build-gpu bench/qkgrad-bench-attention)", file=sys.stderr)
        return 2
    import torch
    if not torch.cuda.is_available():
        print(f"gpu_attention.py: error: PyTorch {torch.__version__} sees no GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    contender = TorchAttention(torch, o)
    rows, failed = {}, False
    for mode in modes:
        for t in o.lengths:
            try:
                ours = run_qkgrad(o, mode, t)
            except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
                log(f"[{mode} T {t}] qkgrad FAILED: {e}")
                failed = True
                continue
            for causal in (False, True):
                theirs = contender.time(mode, causal, t)
                rows[(mode, causal, t)] = (ours[causal], theirs)
                log(f"[{mode} T {t} causal {causal}] qkgrad {ours[causal]['train_ms']:.3f} ms, "
                    f"PyTorch {theirs['train_ms']:.3f} ms forward + backward")
                if o.jsonl:
                    with open(o.jsonl, "a") as f:
                        f.write(json.dumps({**ours[causal], "framework": "qkgrad"}) + "\n")
                        f.write(json.dumps({**theirs, "gpu": gpu, "torch_version": torch.__version__}) + "\n")
    print(table(o, rows, torch, gpu))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
