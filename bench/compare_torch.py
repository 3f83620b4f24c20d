#!/usr/bin/env python3
"""qkgrad against PyTorch: one training step of the same Seq2SeqTransformer, side by side.

    python3 bench/compare_torch.py [--configs A,B,C] [--rounds 3] [--steps N] [--threads 2]
                                   [--contenders qkgrad,qkgrad-bf16,torch,torch-bf16]
                                   [--qkgrad build/bench/qkgrad-bench] [--attn qknorm] [--json FILE]
    python3 bench/compare_torch.py torch-step [qkgrad-bench's flags] [--precision f32|bf16]
                                                                        (one PyTorch measurement)
    python3 bench/compare_torch.py check [--qkgrad PATH]                (is it the same model and step?)
    python3 bench/compare_torch.py attention [--shape 16,8,64,64]       (the fused attention op alone)
    python3 bench/compare_torch.py lm [...]                             (the language model's step:
                                                                        bench/compare_torch_lm.py)
    python3 bench/compare_torch.py gpu [--qkgrad build-gpu/bench/qkgrad-bench] [--rounds 3]
                                   [--attn qknorm,scaled_dot] [--jsonl FILE]  (both steps on the GPU)

Run it with Debian's Python and PyTorch (/usr/bin/python3, `apt-get install python3-torch`), from
the repository root after building the benchmarks (`meson setup build && ninja -C build
bench/qkgrad-bench bench/qkgrad-bench-sgemm`). Nothing touches the network.

The step (bench/bench_train.cpp does the same in qkgrad):
    zero_grad; logits = model(src, src_lengths, tgt_in, tgt_lengths) (teacher forcing);
    loss = F.cross_entropy(logits, tgt_out, label_smoothing=0.1, ignore_index=0 (pad)), the mean
    over target tokens; loss.backward(); clip_grad_norm_(parameters, 1.0); Adam (lr 1e-3,
    betas 0.9/0.999, eps 1e-8, no weight decay) step.
Inputs are random token ids in [4, vocab) (no special tokens), every sentence of the full
length; the padding and causal masks are still built from the lengths and applied every step.
The model is docs/checkpoint.md's: tools/qkgrad_torch.py (the PyTorch model shared with
tools/torch_reference.py, here with ops="library"), float32, with qkgrad's defaults (LayerNorm,
FixNorm, one QKNorm gain per attention module): tied FixNorm embeddings scaled by √D plus
sinusoidal positions, pre-norm encoder layers (self-attention, ReLU FFN) and decoder layers
(causal self-attention, cross-attention, ReLU FFN), final encoder/decoder norms, logits =
decoder.norm(y) Êᵀ. The parameter names and shapes are those of docs/checkpoint.md's tensor
list (the worker checks this on every run). Initialisation is not qkgrad's; it does not matter for speed. PyTorch runs
"out of the box": idiomatic modules (nn.Linear, F.layer_norm, F.normalize, F.embedding, matmul
+ masked_fill + softmax attention), the library's default options (Adam without foreach,
zero_grad zeroing).

Timing, like qkgrad-bench: --warmup-steps untimed steps, then --steps timed ones; the median
(sorted[n // 2]), min and max milliseconds per step; target tokens per second = batch × tgt_len /
median; GFLOP/s = the step's matrix-product FLOPs / median, counted with qkgrad-bench's formula
(every product 2·m·n·k, ×3 for forward + backward; see flops_per_step); peak RSS from getrusage.

The driver runs, for each config, --rounds rounds of the contenders (--contenders), each run a
fresh process, alternating in one session (qkgrad, qkgrad-bf16, torch, torch-bf16, qkgrad, ...),
so slow drift of the machine hits all of them alike. The default four:
  qkgrad          build/bench/qkgrad-bench --json (float32), the inherited environment;
  qkgrad-bf16     the same with --precision bf16: mixed precision, bf16 matrix products with float32
                  accumulation, float32 master weights (ops/precision.h);
  torch           this script's torch-step worker, float32 (GLIBC_TUNABLES removed, if set);
  torch-bf16      the same worker with --precision bf16: the forward and the loss inside
                  torch.autocast("cpu", dtype=torch.bfloat16), the backward outside it (as PyTorch's
                  autocast docs recommend), gradient clipping and Adam on the float32 parameters.
Also selectable: torch-tuned (and torch-tuned-bf16), the worker with
LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp prepended (the OpenMP build of OpenBLAS,
whose threads are libgomp's, shared with PyTorch's, instead of a second pool fighting them) and
GLIBC_TUNABLES=glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296
(glibc otherwise mmaps every buffer over 32 MB, such as the logits, afresh each step, and
first-touch page faults are slow on VMs); torch-default is another name for torch. The earlier
three-way comparison is `--contenders qkgrad,torch-default,torch-tuned`.

The OpenBLAS rule: some machines set OPENBLAS_CORETYPE (e.g. Haswell) and OPENBLAS_L2_SIZE in the
environment, because OpenBLAS 0.3.21 misdetects their CPU. They would force PyTorch's OpenBLAS
onto other (e.g. AVX2) kernels than it picks for itself, so every PyTorch worker runs with both
removed (its own detection decides); the qkgrad contenders keep the inherited environment. The
report says what the environment had set and what each PyTorch worker ran with.

Each contender's figure is the median over the rounds. build/bench/qkgrad-bench-sgemm runs once
first: the machine's float32 peak, its best one-thread sgemm times the threads, is what the
float32 contenders' GFLOP/s is compared with (and the report names qkgrad's float32 GEMM
provider); `qkgrad-bench-sgemm --precision bf16` gives the bf16 peak (bf16 operands, float32
accumulation) for the bf16 contenders, or, where it is missing or fails, their % of peak is n/a.
Each torch worker reports which BLAS library is mapped into it (/proc/self/maps) and, through
OpenBLAS's own API, its build (openblas_get_config), the kernels it picked (openblas_get_corename)
and threading (openblas_get_parallel: sequential, pthreads or OpenMP), the environment it ran with,
and, for bf16, the dtypes autocast gave the logits and the loss and whether oneDNN (mkldnn, which
PyTorch's bf16 CPU matrix products use) is available.
Output: a Markdown table per config (per contender: median ms/step, target tokens/s with the range
over the rounds, GFLOP/s, % of the peak of its precision, peak RSS, page faults per step) and a
summary table on stdout (tokens/s of each contender and the ratios the project's goals are
stated in: qkgrad bf16 ÷ qkgrad f32, qkgrad bf16 ÷ PyTorch autocast bf16, qkgrad f32 ÷ PyTorch
f32), progress on stderr; --json FILE also writes every raw result. A contender that fails (e.g.
qkgrad-bench --precision bf16 refused) is reported as failed, with its reason; the others still
run. The driver also checks every result: each qkgrad contender's gflops × median_ms must give
this script's FLOPs per step, the torch model's parameters must match docs/checkpoint.md, and each
run must report the precision it was asked for. The 1-minute load average is recorded before each
run: on a shared machine (load near the CPU count) multi-threaded runs slow down unevenly; compare
such numbers with care.

Configs (the last column: sentences per batch × tokens per sentence, source and target alike):
  A  3+3 layers, d 256, 4 heads, ffn 1024, vocab 8000, 32 × 40
  B  6+6 layers, d 512, 8 heads, ffn 2048, vocab 8000, 16 × 64
  C  2+2 layers, d 128, 4 heads, ffn  512, vocab 4000, 64 × 32

`check` verifies that the two programs time the same work: for small configs it recovers
qkgrad-bench's FLOPs per step from its JSON (gflops × median_ms, within print rounding) and
compares them with this script's formula; it counts the matrix-product FLOPs PyTorch actually
executes in one step with the profiler (aten::mm/addmm/bmm, forward and backward) against the same
formula; and it compares the PyTorch model's parameter names, shapes and count with the tensor
list of docs/checkpoint.md (qkgrad-bench prints no parameter count; that list was also checked,
once, against qkgrad's own Seq2SeqTransformer::named_parameters() for configs A, B and C with
both attentions: the same names, shapes, order and count). It also checks qkgrad-bench
--precision bf16's FLOPs (where the binary has the flag) and that PyTorch's autocast bf16 step
trains, with bfloat16 logits and a float32 loss. `attention` alternates qkgrad-bench-attention
with the worker as torch and torch-tuned (the OpenBLAS rule applies there too).

On the GPU (`torch-step --device cuda`, and the `gpu` subcommand that alternates it with
`qkgrad-bench --device cuda`): the model, the batch and Adam's state live on the GPU; PyTorch's
TF32 is switched off (matrix products and cuDNN in IEEE float32, as qkgrad's cuBLAS path), or on
for both when QKGRAD_CUDA_TF32=1 (qkgrad's cuBLAS then uses TF32 tensor cores too), every
timed step is bracketed by torch.cuda.synchronize() (the step also reads the loss back, as
qkgrad-bench's does), and the memory reported is torch.cuda.max_memory_allocated (bytes handed to
tensors, like qkgrad's caching-allocator peak) as peak_device_mb. Adam and gradient clipping keep
PyTorch's defaults, which on CUDA are the foreach (multi-tensor) implementations; the JSON says
which. `gpu` runs --rounds rounds, each of qkgrad then PyTorch for every attention (config B by
default: the paper's base size), each run a fresh process, appends every raw result to --jsonl
and prints a Markdown table with the ratios; scripts/gpu_check.sh calls it on the GPU machine
(docs/gpu-check.md). The CPU paths above are unchanged: without --device (or with --device cpu)
the worker's output has no new fields.

Exit status: 0 success, 1 a failed run or check, 2 usage errors or missing programs.
"""

import argparse
import collections
import contextlib
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

# The PyTorch model is tools/qkgrad_torch.py, shared with tools/torch_reference.py: put the
# repository's tools/ directory (found from this script's own path, whatever the working
# directory) first on the import path. It is imported only where torch is needed.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))

CONFIGS = {
    "A": dict(layers=3, d_model=256, heads=4, ffn=1024, vocab=8000, batch=32, src_len=40, tgt_len=40),
    "B": dict(layers=6, d_model=512, heads=8, ffn=2048, vocab=8000, batch=16, src_len=64, tgt_len=64),
    "C": dict(layers=2, d_model=128, heads=4, ffn=512, vocab=4000, batch=64, src_len=32, tgt_len=32),
}
OPENBLAS_OPENMP_DIR = "/usr/lib/x86_64-linux-gnu/openblas-openmp"
TUNED_GLIBC_TUNABLES = "glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296"
LABEL_SMOOTHING = 0.1
PAD_ID = 0
FIRST_WORD_ID = 4  # ids 0-3 are pad, bos, eos, unk
BUILD_HINT = "meson setup build && ninja -C build bench/qkgrad-bench bench/qkgrad-bench-sgemm"
TORCH_HINT = "PyTorch is not installed for this Python: apt-get install python3-torch (and run /usr/bin/python3)"
PRECISIONS = ("f32", "bf16")
# Set on some machines because OpenBLAS 0.3.21 misdetects their CPU; removed for the PyTorch
# workers only (the OpenBLAS rule in the header), kept for qkgrad.
OPENBLAS_FORCING = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

# A contender: which program (qkgrad-bench or this script's torch-step worker), at which
# precision, and for PyTorch whether in the tuned environment (OpenMP OpenBLAS, GLIBC_TUNABLES).
Contender = collections.namedtuple("Contender", "program precision tuned title")
CONTENDERS = {
    "qkgrad": Contender("qkgrad", "f32", False, "qkgrad f32"),
    "qkgrad-bf16": Contender("qkgrad", "bf16", False, "qkgrad bf16"),
    "torch": Contender("torch", "f32", False, "PyTorch f32"),
    "torch-bf16": Contender("torch", "bf16", False, "PyTorch autocast bf16"),
    "torch-tuned": Contender("torch", "f32", True, "PyTorch f32 tuned"),
    "torch-tuned-bf16": Contender("torch", "bf16", True, "PyTorch autocast bf16 tuned"),
}
CONTENDER_ALIASES = {"torch-default": "torch"}  # the old name of PyTorch out of the box
DEFAULT_CONTENDERS = ("qkgrad", "qkgrad-bf16", "torch", "torch-bf16")


class BenchError(Exception):
    """A problem the user has to fix (missing program, bad flag): exit status 2."""


# ---- what both programs compute: the step's FLOPs and the model's parameters ----

def flops_per_step(o):
    """Matrix-product FLOPs of one step, qkgrad-bench's formula: 2·m·n·k per product, ×3 for backward.

    With BS = B·S source and BT = B·T target tokens, per layer pair:
      encoder: q, k, v, out projections 4·2·BS·D², scores and P·V 2·2·B·S²·D, FFN 2·2·BS·D·F;
      decoder: self-attention 4·2·BT·D² + 2·2·B·T²·D, cross-attention q and out 2·2·BT·D²,
               k and v of the memory 2·2·BS·D², scores and P·V 2·2·B·T·S·D, FFN 2·2·BT·D·F;
    once: the tied output layer 2·BT·D·V.
    """
    B, S, T = o.batch, o.src_len, o.tgt_len
    D, F, V = o.d_model, o.ffn, o.vocab
    BS, BT = B * S, B * T
    encoder = 4 * 2 * BS * D * D + 2 * 2 * B * S * S * D + 2 * 2 * BS * D * F
    decoder = (4 * 2 * BT * D * D + 2 * 2 * B * T * T * D + 2 * 2 * BT * D * D + 2 * 2 * BS * D * D
               + 2 * 2 * B * T * S * D + 2 * 2 * BT * D * F)
    output = 2 * BT * D * V
    return float(3 * (o.layers * (encoder + decoder) + output))


def expected_parameters(o):
    """{name: shape} of docs/checkpoint.md's tensor list, for qkgrad-bench's model.

    qkgrad-bench uses TransformerConfig's defaults beyond its flags: LayerNorm (gamma, beta [D]),
    one QKNorm gain g [] per attention module (none for scaled_dot), FixNorm, tied embeddings.
    """
    D, F = o.d_model, o.ffn
    shapes = {"embedding.weight": (o.vocab, D)}

    def norm(prefix):
        shapes[prefix + ".gamma"] = (D,)
        shapes[prefix + ".beta"] = (D,)

    def attention(prefix):
        if o.attn == "qknorm":
            shapes[prefix + ".g"] = ()
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            shapes[f"{prefix}.{proj}.weight"] = (D, D)
            shapes[f"{prefix}.{proj}.bias"] = (D,)

    def ffn(prefix):
        shapes[prefix + ".fc1.weight"], shapes[prefix + ".fc1.bias"] = (F, D), (F,)
        shapes[prefix + ".fc2.weight"], shapes[prefix + ".fc2.bias"] = (D, F), (D,)

    for i in range(o.layers):
        p = f"encoder.layers.{i}"
        norm(p + ".norm1"), attention(p + ".self_attn"), norm(p + ".norm2"), ffn(p + ".ffn")
    norm("encoder.norm")
    for j in range(o.layers):
        p = f"decoder.layers.{j}"
        norm(p + ".norm1"), attention(p + ".self_attn"), norm(p + ".norm2"), attention(p + ".cross_attn")
        norm(p + ".norm3"), ffn(p + ".ffn")
    norm("decoder.norm")
    return shapes


def parameter_count(shapes):
    return sum(math.prod(shape) for shape in shapes.values())


# ---- the flags, the same as qkgrad-bench's ----

def at_least(minimum):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"needs an integer >= {minimum}, got '{text}'") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"needs an integer >= {minimum}, got '{text}'")
        return value
    return parse


def probability(text):
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got '{text}'")
    return value


def step_parser():
    """qkgrad-bench's flags and defaults (bench/bench_train.cpp)."""
    parser = argparse.ArgumentParser(prog="compare_torch.py torch-step",
                                     description="Time one PyTorch training step of the Seq2SeqTransformer "
                                                 "(the flags and output of qkgrad-bench).")
    a = CONFIGS["A"]
    for flag, minimum, default in (("--layers", 1, a["layers"]), ("--d-model", 1, a["d_model"]),
                                   ("--heads", 1, a["heads"]), ("--ffn", 1, a["ffn"]), ("--vocab", 5, a["vocab"]),
                                   ("--batch", 1, a["batch"]), ("--src-len", 1, a["src_len"]),
                                   ("--tgt-len", 1, a["tgt_len"]), ("--steps", 1, 10), ("--warmup-steps", 0, 2),
                                   ("--threads", 0, 0)):
        parser.add_argument(flag, type=at_least(minimum), default=default, metavar="N")
    parser.add_argument("--attn", choices=["qknorm", "scaled_dot"], default="qknorm")
    parser.add_argument("--dropout", type=probability, default=0.0, metavar="P")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="where the model, the batch and the step run (cuda: TF32 as QKGRAD_CUDA_TF32 says, default off)")
    parser.add_argument("--precision", choices=PRECISIONS, default="f32",
                        help="f32, or bf16: the forward and the loss under torch.autocast(dtype=torch.bfloat16), the "
                             "backward outside it, clipping and Adam on the float32 parameters")
    parser.add_argument("--json", action="store_true", help="print one JSON line, like qkgrad-bench --json")
    return parser


def step_flags(o):
    """The command-line flags that reproduce the step options o (for qkgrad-bench and the worker)."""
    flags = []
    for key in ("layers", "d_model", "heads", "ffn", "vocab", "batch", "src_len", "tgt_len", "steps",
                "warmup_steps", "threads"):
        if key == "threads" and o.threads == 0:
            continue  # the gpu subcommand's default: each program's own (qkgrad-bench takes >= 1)
        flags += ["--" + key.replace("_", "-"), str(getattr(o, key))]
    flags += ["--attn", o.attn, "--dropout", repr(o.dropout)]
    device = getattr(o, "device", "cpu")
    return flags + (["--device", device] if device != "cpu" else []) + precision_flags(getattr(o, "precision", "f32"))


def precision_flags(precision):
    """--precision for qkgrad-bench and the worker; none for f32, the default of both (and all an
    older qkgrad-bench, without the flag, understands)."""
    return [] if precision == "f32" else ["--precision", precision]


# ---- the PyTorch worker ----

def import_torch():
    try:
        import torch
    except ImportError:
        raise BenchError(TORCH_HINT) from None
    return torch


def model_module():
    """tools/qkgrad_torch.py, the PyTorch model shared with tools/torch_reference.py (it imports torch)."""
    import_torch()
    import qkgrad_torch
    return qkgrad_torch


def build_model(torch, o):
    """docs/checkpoint.md's Seq2SeqTransformer in PyTorch (tools/qkgrad_torch.py), float32, with
    qkgrad-bench's settings: LayerNorm, FixNorm, one QKNorm gain per attention module initialised to
    log2(L² − L) with L = max(src_len, tgt_len) (qkgrad-bench's qknorm_length), --dropout for every
    dropout but word dropout (as qkgrad-bench sets them). "Out of the box" PyTorch: ops="library"
    (F.layer_norm, F.normalize, FixNorm's Ê once per forward, F.embedding, F.linear); no handling of
    rows that see no key (every length here is >= 1); the positions precomputed once for L rows."""
    qt = model_module()
    longest = max(o.src_len, o.tgt_len)
    g0 = math.log2(longest * longest - longest) if longest > 1 else 1.0  # qknorm_length L: g = log2(L² − L)
    cfg = qt.ModelConfig(vocab=o.vocab, d_model=o.d_model, heads=o.heads, ffn=o.ffn, encoder_layers=o.layers,
                         decoder_layers=o.layers, norm="layer_norm", attention=o.attn, per_head_g=False, fixnorm=True,
                         g_init=g0, dropout=o.dropout, attention_dropout=o.dropout, ffn_dropout=o.dropout,
                         ops="library", zero_empty_rows=False, position_table=longest)
    return qt.Seq2SeqTransformer(cfg, dtype=torch.float32)


class TorchStep:
    """The model, its optimizer and one fixed batch; step() is one training step."""

    def __init__(self, torch, o):
        self.torch, self.o, self.qt = torch, o, model_module()
        device = getattr(o, "device", "cpu")
        # bf16: PyTorch's automatic mixed precision. autocast runs the matrix products (F.linear,
        # matmul) in bfloat16 and the ops on its float32 list (the loss) in float32; the parameters,
        # their gradients, clipping and Adam stay float32.
        if getattr(o, "precision", "f32") == "bf16":
            self.autocast = lambda: torch.autocast(device, dtype=torch.bfloat16)
        else:
            self.autocast = contextlib.nullcontext
        self.dtypes = None  # (logits, loss) of the last step: what autocast really did
        torch.manual_seed(1)
        self.model = build_model(torch, o).train().to(device)  # initialised on the CPU, then moved
        self.params = list(self.model.parameters())
        self.optimizer = torch.optim.Adam(self.params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
        data = torch.Generator().manual_seed(42)

        def random_ids(rows, cols):
            return torch.randint(FIRST_WORD_ID, o.vocab, (rows, cols), generator=data)

        self.src, self.tgt_in, self.tgt_out = (random_ids(o.batch, o.src_len).to(device),
                                               random_ids(o.batch, o.tgt_len).to(device),
                                               random_ids(o.batch, o.tgt_len).to(device))
        self.src_lengths = torch.full((o.batch,), o.src_len, dtype=torch.long, device=device)
        self.tgt_lengths = torch.full((o.batch,), o.tgt_len, dtype=torch.long, device=device)

    def step(self):
        self.optimizer.zero_grad()
        with self.autocast():  # the forward and the loss; the backward outside, as PyTorch's docs recommend
            logits = self.model(self.src, self.src_lengths, self.tgt_in, self.tgt_lengths)
            loss = self.qt.label_smoothed_cross_entropy(logits.reshape(-1, self.o.vocab), self.tgt_out.reshape(-1),
                                                        PAD_ID, LABEL_SMOOTHING)  # the mean over target tokens
        self.dtypes = (str(logits.dtype).replace("torch.", ""), str(loss.dtype).replace("torch.", ""))
        loss.backward()
        self.torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.optimizer.step()
        return float(loss.detach())


def mapped_libraries(words=("blas", "lapack", "gomp", "libiomp", "mkl", "dnnl")):
    """The shared libraries mapped into this process whose file names contain one of words."""
    found = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                path = fields[5].strip() if len(fields) == 6 else ""
                if path.startswith("/") and any(w in os.path.basename(path) for w in words) and path not in found:
                    found.append(path)
    except OSError:
        pass
    return found


def openblas_report(libraries):
    """OpenBLAS's own account of the mapped library: its build string, the kernels it picked (its core:
    its own detection, or OPENBLAS_CORETYPE), threading model and thread count."""
    import ctypes

    report = {}
    for path in libraries:
        if "openblas" not in os.path.basename(path):
            continue
        try:
            lib = ctypes.CDLL(path)  # already loaded: the same handle, nothing new is loaded
            lib.openblas_get_config.restype = ctypes.c_char_p
            report = {"path": path, "realpath": os.path.realpath(path),
                      "config": lib.openblas_get_config().decode(errors="replace").strip(),
                      "parallel": {0: "sequential", 1: "pthreads", 2: "OpenMP"}.get(lib.openblas_get_parallel(), "?"),
                      "num_threads": lib.openblas_get_num_threads()}
            try:  # DYNAMIC_ARCH builds (Debian's): the core whose kernels run
                lib.openblas_get_corename.restype = ctypes.c_char_p
                report["corename"] = lib.openblas_get_corename().decode(errors="replace").strip()
            except AttributeError:
                pass
        except (OSError, AttributeError) as e:
            report = {"path": path, "error": str(e)}
        break
    return report


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # ru_maxrss is in KiB on Linux


def tf32_wanted():
    """QKGRAD_CUDA_TF32=1 turns TF32 on for qkgrad's cuBLAS products (backends/cuda/cuda_backend.h);
    the PyTorch worker reads the same variable, so one setting governs both contenders."""
    return os.environ.get("QKGRAD_CUDA_TF32", "0") not in ("", "0")


def prepare_gpu(torch):
    """Checks that PyTorch sees a GPU and sets TF32 as qkgrad's run has it; returns what the JSON
    reports about it.

    qkgrad's CUDA backend multiplies float32 matrices with cuBLAS in plain float32 (no TF32 tensor
    cores) unless QKGRAD_CUDA_TF32=1, so PyTorch must do the same, or the comparison times
    arithmetic of another precision. PyTorch 2.9 and later have per-backend fp32_precision
    settings ("ieee" = no TF32, "tf32") and may raise when they are mixed with the older
    allow_tf32 flags, so only one of the two is used."""
    if not torch.cuda.is_available():
        raise BenchError(f"--device cuda: PyTorch {torch.__version__} sees no GPU (torch.cuda.is_available() is "
                         f"False; built for CUDA {torch.version.cuda})")
    on = tf32_wanted()
    tf32 = {}
    if hasattr(torch.backends, "fp32_precision"):  # only the new API: mixing the two can raise
        backends = {"torch.backends.cuda.matmul": torch.backends.cuda.matmul,
                    "torch.backends.cudnn": torch.backends.cudnn,
                    "torch.backends.cudnn.conv": getattr(torch.backends.cudnn, "conv", None),
                    "torch.backends.cudnn.rnn": getattr(torch.backends.cudnn, "rnn", None)}
        if not on:  # the global default too ("tf32" is not a valid global value in every version)
            backends = {"torch.backends": torch.backends, **backends}
        for name, backend in backends.items():
            if backend is None or not hasattr(backend, "fp32_precision"):
                continue
            try:
                backend.fp32_precision = "tf32" if on else "ieee"
                tf32[name + ".fp32_precision"] = backend.fp32_precision
            except (AttributeError, RuntimeError, ValueError) as e:
                tf32[name + ".fp32_precision"] = f"could not set: {e}"
        if tf32.get("torch.backends.cuda.matmul.fp32_precision") != ("tf32" if on else "ieee"):
            raise BenchError(f"could not switch TF32 {'on' if on else 'off'} for matrix products: {tf32}")
    else:
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on
        torch.set_float32_matmul_precision("high" if on else "highest")
        tf32 = {"torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
                "float32_matmul_precision": torch.get_float32_matmul_precision()}
    return {"gpu": torch.cuda.get_device_name(), "torch_cuda": torch.version.cuda, "tf32": on,
            "tf32_settings": tf32}


def cpu_capability(torch):
    """The vector ISA PyTorch's own CPU kernels (softmax, layer_norm, ...) dispatch to, as it reports it."""
    try:
        return next((line.split(":", 1)[1].strip() for line in torch.__config__.show().splitlines()
                     if "CPU capability usage" in line), None)
    except (AttributeError, RuntimeError):
        return None


def optimizer_implementation(torch, params):
    """Which Adam PyTorch picks by default for these parameters (foreach on CUDA, a for-loop on the CPU)."""
    try:
        from torch.optim.optimizer import _default_to_fused_or_foreach
        fused, foreach = _default_to_fused_or_foreach(params, differentiable=False, use_fused=False)
        return "fused" if fused else "foreach" if foreach else "for-loop"
    except (ImportError, TypeError, ValueError):  # a private helper: its signature may change
        return "PyTorch's default (foreach=None)"


def run_worker(argv):
    o = step_parser().parse_args(argv)
    if o.d_model % o.heads:
        raise BenchError(f"--d-model {o.d_model} is not divisible by --heads {o.heads}")
    torch = import_torch()
    on_gpu = o.device == "cuda"
    gpu = prepare_gpu(torch) if on_gpu else None
    if o.threads > 0:
        torch.set_num_threads(o.threads)
    bench = TorchStep(torch, o)
    shapes = {name: tuple(p.shape) for name, p in bench.model.named_parameters()}
    # The GPU runs asynchronously: wait for it before reading the clock (step() also ends by
    # reading the loss back, which waits for the whole step, as qkgrad-bench's step does).
    synchronize = torch.cuda.synchronize if on_gpu else (lambda: None)
    losses = [bench.step() for _ in range(o.warmup_steps)]
    faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    ms = []
    for _ in range(o.steps):
        synchronize()
        t0 = time.perf_counter()
        losses.append(bench.step())
        synchronize()
        ms.append((time.perf_counter() - t0) * 1000.0)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before
    ordered = sorted(ms)
    median = ordered[len(ordered) // 2]  # as qkgrad-bench: the upper median for an even count
    flops = flops_per_step(o)
    libraries = mapped_libraries()
    result = {
        "framework": "torch", "layers": o.layers, "d_model": o.d_model, "heads": o.heads, "ffn": o.ffn,
        "vocab": o.vocab, "batch": o.batch, "src_len": o.src_len, "tgt_len": o.tgt_len, "attn": o.attn,
        "dropout": o.dropout}
    if on_gpu:  # the CPU's output stays as it was: no device field there
        result["device"] = "cuda"
    result["precision"] = o.precision  # as qkgrad-bench's JSON
    result.update({
        "threads": torch.get_num_threads(),
        "median_ms": round(median, 3), "min_ms": round(ordered[0], 3), "max_ms": round(ordered[-1], 3),
        "tgt_tokens_per_s": round(o.batch * o.tgt_len / (median / 1000.0), 1),
        "gflops": round(flops / (median / 1000.0) / 1e9, 2)})
    if on_gpu:  # like qkgrad-bench --device cuda: the allocator's peak, bytes handed to tensors
        result["peak_device_mb"] = round(torch.cuda.max_memory_allocated() / (1 << 20), 1)
    result.update({
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "page_faults_per_step": round(faults / o.steps, 1),
        # Beyond qkgrad-bench's fields: what the comparison needs to trust the numbers.
        "torch_version": torch.__version__, "parameters": sum(p.numel() for p in bench.params),
        "matches_checkpoint_md": shapes == expected_parameters(o),
        "final_loss": round(losses[-1], 4) if losses else None,
        "blas_libraries": libraries, "openblas": openblas_report(libraries),
        "onednn": torch.backends.mkldnn.is_available(), "cpu_capability": cpu_capability(torch),
        "env": {k: os.environ.get(k) for k in ("LD_LIBRARY_PATH", "GLIBC_TUNABLES", "OMP_NUM_THREADS",
                                               "OPENBLAS_NUM_THREADS") + OPENBLAS_FORCING},
    })
    if o.precision == "bf16":
        result["autocast"] = {"dtype": "bfloat16", "device_type": o.device, "logits_dtype": bench.dtypes[0],
                              "loss_dtype": bench.dtypes[1]}
    if on_gpu:
        result.update(gpu, adam=optimizer_implementation(torch, bench.params),
                      peak_reserved_mb=round(torch.cuda.max_memory_reserved() / (1 << 20), 1))
    if o.json:
        print(json.dumps(result))
    else:
        where = (f"on {result['gpu']} (CUDA {result['torch_cuda']}, TF32 {'on' if result['tf32'] else 'off'})"
                 if on_gpu else "")
        print(f"PyTorch {torch.__version__} training step: {o.layers}+{o.layers} layers, d {o.d_model}, {o.heads} heads, "
              f"ffn {o.ffn}, vocab {o.vocab}, {o.batch} x {o.src_len}/{o.tgt_len} tokens, {o.attn}, dropout {o.dropout:g}, "
              f"{describe_precision(result)}, {result['threads']} threads" + (" " + where if where else ""))
        print(f"ms per step: median {median:.2f}  min {ordered[0]:.2f}  max {ordered[-1]:.2f}  "
              f"({o.steps} steps after {o.warmup_steps} warm-up)")
        memory = (f"peak device memory {result['peak_device_mb']:.0f} MB" if on_gpu
                  else f"peak RSS {result['peak_rss_mb']:.0f} MB")
        print(f"target tokens/s {result['tgt_tokens_per_s']:.0f}   matmul GFLOP/s {result['gflops']:.1f} "
              f"({flops / 1e9:.2f} GFLOP per step)   {memory}")
        print(f"{result['page_faults_per_step']:.1f} page faults per step; {result['parameters']} parameters "
              f"({'as' if result['matches_checkpoint_md'] else 'NOT as'} in docs/checkpoint.md); "
              + (f"Adam: {result['adam']}" if on_gpu else f"BLAS: {describe_blas(result)}"))
    return 0


def describe_precision(result):
    """float32, or what autocast did: the dtypes of the logits and the loss."""
    autocast = result.get("autocast")
    if result.get("precision", "f32") == "f32" or not autocast:
        return "float32"
    return (f"autocast {autocast['dtype']} (logits {autocast['logits_dtype']}, loss {autocast['loss_dtype']}; "
            f"oneDNN {'available' if result.get('onednn') else 'NOT available'})")


def describe_blas(result):
    blas = result.get("openblas") or {}
    if "config" in blas:
        if blas["parallel"] == "OpenMP":
            threading = "OpenMP build: its threads are libgomp's, as many as PyTorch's"
        elif blas["parallel"] == "pthreads":
            threading = f"pthreads build: its own pool of {blas['num_threads']} threads beside PyTorch's"
        else:
            threading = f"{blas['parallel']} build"
        core = f"core {blas['corename']}; " if blas.get("corename") else ""
        return f"{blas['realpath']} ({core}{threading}; {blas['config']})"
    if "error" in blas:
        return f"{blas['path']} (could not query: {blas['error']})"
    return ", ".join(result.get("blas_libraries") or []) or "no BLAS library mapped"


# ---- running the contenders ----

def repository_root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_program(path, what):
    """path as given, else relative to the repository root; a clear error if neither exists."""
    for candidate in (path, os.path.join(repository_root(), path)):
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    raise BenchError(f"{what} not found at '{path}' (nor under {repository_root()}): build it first: {BUILD_HINT}")


def parse_contenders(text):
    """--contenders: comma-separated names from CONTENDERS (or CONTENDER_ALIASES), each run once, in order."""
    names = []
    for word in (w.strip().lower() for w in text.split(",")):
        name = CONTENDER_ALIASES.get(word, word)
        if not word or name in names:
            continue
        if name not in CONTENDERS:
            raise argparse.ArgumentTypeError(f"unknown contender '{word}'; choose from "
                                             f"{', '.join(list(CONTENDERS) + list(CONTENDER_ALIASES))}")
        names.append(name)
    if not names:
        raise argparse.ArgumentTypeError("no contender given")
    return tuple(names)


def contender_env(name):
    """The environment of a contender's process: qkgrad's is the inherited one. A PyTorch worker's
    has no OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (the OpenBLAS rule: its OpenBLAS detects the CPU
    itself), and either no GLIBC_TUNABLES (out of the box) or the tuned OpenBLAS and glibc settings."""
    c = CONTENDERS[name]
    env = dict(os.environ)
    if c.program != "torch":
        return env
    for variable in OPENBLAS_FORCING:
        env.pop(variable, None)
    if c.tuned:
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = OPENBLAS_OPENMP_DIR + (":" + old if old else "")
        env["GLIBC_TUNABLES"] = TUNED_GLIBC_TUNABLES
    else:
        env.pop("GLIBC_TUNABLES", None)
    return env


def run_json(command, env, timeout):
    """Runs command, returns (the JSON object of its last '{' line, seconds); raises RuntimeError on failure."""
    t0 = time.monotonic()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"timed out after {timeout} s: {' '.join(command)}") from None
    seconds = time.monotonic() - t0
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip() or done.stdout.strip())[-2000:]
        raise RuntimeError(f"exit status {done.returncode}: {' '.join(command)}\n{tail}")
    try:
        return json.loads(lines[-1]), seconds
    except ValueError as e:
        raise RuntimeError(f"unreadable JSON from {' '.join(command)}: {e}\n{lines[-1]}") from None


def contender_command(name, o, qkgrad):
    """qkgrad-bench or the torch-step worker, with the step options o at the contender's precision."""
    c = CONTENDERS[name]
    flags = step_flags(argparse.Namespace(**{**vars(o), "precision": c.precision}))
    if c.program == "qkgrad":
        return [qkgrad, "--json"] + flags
    return [sys.executable, os.path.abspath(__file__), "torch-step", "--json"] + flags


def recovered_flops(result):
    """qkgrad-bench's FLOPs per step, recovered from its JSON, and the bound set by its print rounding."""
    g, ms = result["gflops"], result["median_ms"]
    return g * ms * 1e6, ((g + 0.005) * (ms + 0.0005) - g * ms) * 1e6


def flop_formula_agrees(result, o):
    value, bound = recovered_flops(result)
    return abs(value - flops_per_step(o)) <= bound * 1.01 + 1.0


def step_options(config, args):
    values = dict(CONFIGS[config], steps=args.steps, warmup_steps=args.warmup_steps, threads=args.threads,
                  attn=args.attn, dropout=args.dropout)
    return argparse.Namespace(**values)


def log(message):
    print(message, file=sys.stderr, flush=True)


def run_config(config, o, args, qkgrad):
    """--rounds rounds of the contenders, alternating; returns {contender: [results]} and the failures
    (a failed run is logged and recorded; the other contenders still run, in every round)."""
    runs = {name: [] for name in args.contenders}
    errors = []
    for r in range(1, args.rounds + 1):
        for name in args.contenders:
            load = os.getloadavg()[0]  # recorded with the result: the machine may be shared
            try:
                result, seconds = run_json(contender_command(name, o, qkgrad), contender_env(name), args.timeout)
            except RuntimeError as e:
                errors.append({"config": config, "contender": name, "round": r, "error": str(e)})
                log(f"[{config} {r}/{args.rounds}] {name}: FAILED: {e}")
                continue
            result.update(contender=name, round=r, wall_s=round(seconds, 1), load_average_before=load)
            runs[name].append(result)
            log(f"[{config} {r}/{args.rounds}] {name:<16} {result['median_ms']:9.1f} ms/step "
                f"{result['tgt_tokens_per_s']:9.0f} tok/s {result['gflops']:7.1f} GFLOP/s  ({seconds:.0f} s)")
    return runs, errors


def summarize(results, peak):
    """Medians over the rounds of one contender's runs."""
    if not results:
        return None
    median = lambda key: statistics.median(r[key] for r in results)  # noqa: E731
    tokens = [r["tgt_tokens_per_s"] for r in results]
    gflops = median("gflops")
    return {"median_ms": median("median_ms"), "tgt_tokens_per_s": median("tgt_tokens_per_s"), "gflops": gflops,
            "percent_of_peak": 100.0 * gflops / peak if peak else None,
            "peak_rss_mb": max(r["peak_rss_mb"] for r in results), "tokens_min": min(tokens), "tokens_max": max(tokens),
            "page_faults_per_step": median("page_faults_per_step"), "rounds": len(results)}


def measure_peak(sgemm, precision, threads, timeout):
    """The machine's peak GFLOP/s at precision and qkgrad-bench-sgemm's JSON: its best one-thread
    product times the threads (an older sgemm: its best square product); (None, None) with a warning
    where it has no such measurement (no --precision flag, a failure, another precision answered)."""
    missing = f"no {precision} peak, the % of peak of the {precision} contenders stays n/a"
    if precision != "f32" and not program_has_flag(sgemm, "--precision"):
        log(f"warning: {missing}: {sgemm} has no --precision flag")
        return None, None
    try:
        result, _ = run_json([sgemm, "--json", "--threads", str(threads)] + precision_flags(precision),
                             dict(os.environ), timeout)
    except RuntimeError as e:
        log(f"warning: {missing}: {e}")
        return None, None
    if result.get("precision", "f32") != precision:
        log(f"warning: {missing}: {sgemm} measured precision {result.get('precision', 'f32')}")
        return None, None
    peak = result.get("peak_gflops", result["sgemm_gflops"])
    log(f"sgemm {precision}: best square product {result['sgemm_gflops']:.1f} GFLOP/s on {result.get('threads')} "
        f"threads ({result.get('provider', 'openblas')}); peak {peak:.1f}")
    return peak, result


# ---- the report ----

def fmt(value, digits=0, suffix=""):
    return "n/a" if value is None else f"{value:,.{digits}f}{suffix}"


def ratio(a, b):
    return None if a is None or b is None or not b else a / b


def config_title(config, o):
    return (f"Config {config}: {o.layers}+{o.layers} layers, d {o.d_model}, {o.heads} heads, ffn {o.ffn}, "
            f"vocab {o.vocab}, {o.batch} × {o.src_len}/{o.tgt_len} tokens, {o.attn}, {o.threads} threads, "
            f"{flops_per_step(o) / 1e9:.1f} GFLOP per step")


def config_table(summary, names, rounds):
    lines = ["| contender | ms/step | target tok/s (min–max) | GFLOP/s | % of peak | peak RSS MB | page faults/step |",
             "|---|--:|--:|--:|--:|--:|--:|"]
    for name in names:
        s, title = summary[name], CONTENDERS[name].title
        if s is None:
            lines.append(f"| {title} | failed (see FAILED below) | | | | | |")
            continue
        if s["rounds"] < rounds:
            title += f" ({s['rounds']} of {rounds} rounds)"
        lines.append(f"| {title} | {fmt(s['median_ms'], 1)} | {fmt(s['tgt_tokens_per_s'])} "
                     f"({fmt(s['tokens_min'])}–{fmt(s['tokens_max'])}) | {fmt(s['gflops'], 1)} "
                     f"| {fmt(s['percent_of_peak'], 0, '%')} | {fmt(s['peak_rss_mb'])} | {fmt(s['page_faults_per_step'])} |")
    return "\n".join(lines)


def goal_ratios(names):
    """The (numerator, denominator) contenders of the tokens/s ratios the project's goals are stated
    in, among those run: qkgrad bf16 ÷ qkgrad f32, then qkgrad bf16 ÷ each PyTorch bf16 contender,
    then qkgrad f32 ÷ each PyTorch f32 contender."""
    pairs = [("qkgrad-bf16", "qkgrad")] if "qkgrad-bf16" in names and "qkgrad" in names else []
    for q in ("qkgrad-bf16", "qkgrad"):
        if q in names:
            pairs += [(q, t) for t in names
                      if CONTENDERS[t].program == "torch" and CONTENDERS[t].precision == CONTENDERS[q].precision]
    return pairs


def summary_table(summaries, names):
    pairs = goal_ratios(names)
    title = lambda name: CONTENDERS[name].title  # noqa: E731
    lines = ["| config | " + " | ".join(f"{title(n)} tok/s" for n in names)
             + "".join(f" | {title(a)} ÷ {title(b)}" for a, b in pairs) + " |",
             "|---|" + "--:|" * (len(names) + len(pairs))]
    for config, s in summaries.items():
        tok = lambda name: s[name]["tgt_tokens_per_s"] if s[name] else None  # noqa: E731
        lines.append(f"| {config} | " + " | ".join(fmt(tok(n)) for n in names)
                     + "".join(f" | {fmt(ratio(tok(a), tok(b)), 2, '×')}" for a, b in pairs) + " |")
    return "\n".join(lines)


def environment_line():
    """What the environment sets for OpenBLAS, and what the contenders make of it (the OpenBLAS rule)."""
    forced = [f"{k}={os.environ[k]}" for k in OPENBLAS_FORCING if k in os.environ]
    if forced:
        return (f"The environment sets {', '.join(forced)}: kept for qkgrad, removed for every PyTorch worker, "
                "whose OpenBLAS picks its kernels itself (the OpenBLAS rule, in this script's header).")
    return f"The environment sets neither {' nor '.join(OPENBLAS_FORCING)}: every OpenBLAS picks its kernels itself."


def blas_lines(all_runs, names):
    """What the torch workers said about their BLAS, precision and environment (one line per distinct answer)."""
    lines = []
    torch_names = [n for n in names if CONTENDERS[n].program == "torch"]
    for name in torch_names:
        seen = []
        for runs in all_runs.values():
            for r in runs[name]:
                env = r.get("env", {})
                ran_with = ", ".join(f"{k}={env.get(k) or '(unset)'}"
                                     for k in ("LD_LIBRARY_PATH", "GLIBC_TUNABLES") + OPENBLAS_FORCING)
                text = (f"{describe_blas(r)}; {describe_precision(r)}; PyTorch's own CPU kernels: "
                        f"{r.get('cpu_capability') or '?'}; ran with {ran_with}")
                if text not in seen:
                    seen.append(text)
        for text in seen or ["no successful run"]:
            lines.append(f"- {CONTENDERS[name].title}: {text}")
    results = {name: [r for runs in all_runs.values() for r in runs[name]] for name in torch_names}
    if any(r.get("env", {}).get(k) for rs in results.values() for r in rs for k in OPENBLAS_FORCING):
        lines.append(f"- WARNING: a PyTorch worker ran with {' or '.join(OPENBLAS_FORCING)} set")
    tuned = [r for name in torch_names if CONTENDERS[name].tuned for r in results[name]]
    if tuned and not all(r.get("openblas", {}).get("parallel") == "OpenMP" for r in tuned):
        lines.append("- WARNING: the tuned worker did not load the OpenMP build of OpenBLAS "
                     f"(is {OPENBLAS_OPENMP_DIR} installed? apt-get install libopenblas0-openmp)")
    if any(not r.get("onednn", True) for name in torch_names if CONTENDERS[name].precision == "bf16"
           for r in results[name]):
        lines.append("- Note: this PyTorch has no oneDNN (mkldnn), which its bf16 matrix products on the CPU use.")
    default, tuned_f32 = results.get("torch"), results.get("torch-tuned")
    if default and tuned_f32 and {describe_blas(r) for r in default} == {describe_blas(r) for r in tuned_f32}:
        lines.append("- Note: out of the box, PyTorch already loads the same BLAS here (the system's libblas.so.3 "
                     "alternative points to it), so on this machine the tuned run differs only by GLIBC_TUNABLES.")
    return lines


def check_lines(all_runs, options, names):
    """Consistency checks on every result: each qkgrad contender's FLOPs against the formula, the
    PyTorch parameter list, a finite loss, autocast's dtypes, the precision each run reports.

    A contender without a successful run is left out (its failure is reported on its own line).
    Returns (lines, all passed)."""
    lines, passed = [], True
    for config, runs in all_runs.items():
        o = options[config]
        ran = [n for n in names if runs[n]]
        qkgrad_names = [n for n in ran if CONTENDERS[n].program == "qkgrad"]
        torch_names = [n for n in ran if CONTENDERS[n].program == "torch"]
        torch_runs = [r for n in torch_names for r in runs[n]]
        autocast_runs = [r for n in torch_names if CONTENDERS[n].precision == "bf16" for r in runs[n]]
        checks = []
        if qkgrad_names:
            checks.append((all(flop_formula_agrees(r, o) for n in qkgrad_names for r in runs[n]),
                           f"gflops × median_ms of {', '.join(CONTENDERS[n].title for n in qkgrad_names)} agrees "
                           f"with this script's FLOP formula ({flops_per_step(o) / 1e9:.3f} GFLOP/step)"))
        if torch_names:
            checks.append((all(r.get("matches_checkpoint_md") for r in torch_runs),
                           f"PyTorch's parameters match docs/checkpoint.md ({parameter_count(expected_parameters(o)):,})"))
            checks.append((all(r.get("final_loss") is not None and math.isfinite(r["final_loss"]) for r in torch_runs),
                           "PyTorch's loss is finite"))
        if autocast_runs:
            checks.append((all(r.get("autocast", {}).get("logits_dtype") == "bfloat16"
                               and r["autocast"].get("loss_dtype") == "float32" for r in autocast_runs),
                           "PyTorch's autocast gave bfloat16 logits and a float32 loss"))
        if ran:
            checks.append((all(r.get("precision", "f32") == CONTENDERS[n].precision for n in ran for r in runs[n]),
                           "every run reports the precision it was asked for"))
        else:
            checks.append((False, "any contender ran"))
        good = all(ok for ok, _ in checks)
        passed = passed and good
        lines.append(f"- {config}: " + "; ".join(text if ok else f"NOT: {text}" for ok, text in checks)
                     + ("" if good else "  ← CHECK FAILED"))
    return lines, passed


def failure_lines(errors):
    """One line per config, contender and reason: the same refusal in every round is said once."""
    grouped = {}
    for e in errors:
        lines = [line.strip() for line in e["error"].splitlines() if line.strip()]
        reason = lines[0] + (f" — {lines[-1]}" if len(lines) > 1 else "")
        grouped.setdefault((e["config"], e["contender"], reason), []).append(str(e["round"]))
    return [f"- FAILED: config {config}, {CONTENDERS[name].title}, round{'s' if len(rounds) > 1 else ''} "
            f"{', '.join(rounds)}: {reason}" for (config, name, reason), rounds in grouped.items()]


def machine_line():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs"


def run_driver(argv):
    parser = argparse.ArgumentParser(
        prog="compare_torch.py", description="Time qkgrad's and PyTorch's training step of the same Seq2SeqTransformer, "
                                             "float32 and bf16 mixed precision, alternating, and print the ratios per "
                                             "config (see the file's header).",
        epilog="Contenders: qkgrad (qkgrad-bench, f32), qkgrad-bf16 (qkgrad-bench --precision bf16), torch "
               "(alias torch-default: this script's worker, f32), torch-bf16 (the worker under "
               "torch.autocast(dtype=bfloat16)), torch-tuned and torch-tuned-bf16 (the worker with the OpenMP "
               f"OpenBLAS and GLIBC_TUNABLES). Every PyTorch worker runs without {' and '.join(OPENBLAS_FORCING)} "
               "(qkgrad keeps them). "
               "Subcommands: 'torch-step [flags]' (one PyTorch measurement, qkgrad-bench's flags; --precision bf16 for "
               "autocast; --device cuda on the GPU), 'gpu' (qkgrad-bench and PyTorch on the GPU, alternating), "
               "'check' (is the PyTorch step the same as qkgrad's?), 'attention [--shape B,H,T,d]' (the fused "
               "attention op against PyTorch's composed version, forward + backward).")
    parser.add_argument("--configs", default="A,B,C", help="comma-separated configs from A, B, C (default all)")
    parser.add_argument("--contenders", type=parse_contenders, default=",".join(DEFAULT_CONTENDERS),
                        help=f"comma-separated, run in this order each round, from {', '.join(CONTENDERS)} "
                             f"(torch-default = torch); default {','.join(DEFAULT_CONTENDERS)}")
    parser.add_argument("--rounds", type=at_least(1), default=3, metavar="N", help="rounds per config (default 3)")
    parser.add_argument("--steps", type=at_least(1), default=10, metavar="N", help="timed steps per run (default 10)")
    parser.add_argument("--warmup-steps", type=at_least(0), default=2, metavar="N", help="untimed steps first (default 2)")
    parser.add_argument("--threads", type=at_least(1), default=2, metavar="N", help="threads for all (default 2)")
    parser.add_argument("--attn", choices=["qknorm", "scaled_dot"], default="qknorm")
    parser.add_argument("--dropout", type=probability, default=0.0, metavar="P")
    parser.add_argument("--qkgrad", default="build/bench/qkgrad-bench", metavar="PATH", help="the qkgrad-bench binary")
    parser.add_argument("--sgemm", metavar="PATH", help="qkgrad-bench-sgemm (default: next to --qkgrad)")
    parser.add_argument("--timeout", type=at_least(1), default=1800, metavar="S", help="seconds per run (default 1800)")
    parser.add_argument("--json", metavar="FILE", help="also write every raw result to FILE")
    args = parser.parse_args(argv)
    configs = [c.strip().upper() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or not configs:
        parser.error(f"--configs: unknown config(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(CONFIGS)}")
    names = args.contenders
    titles = [CONTENDERS[n].title for n in names]

    uses = {CONTENDERS[n].program for n in names}
    qkgrad = find_program(args.qkgrad, "qkgrad-bench") if "qkgrad" in uses else None
    import importlib.util
    if "torch" in uses and importlib.util.find_spec("torch") is None:
        raise BenchError(TORCH_HINT)
    # The peak of each precision run: qkgrad-bench-sgemm's best one-thread product × the threads.
    sgemm_path = args.sgemm or os.path.join(os.path.dirname(args.qkgrad), "qkgrad-bench-sgemm")
    peaks, sgemm = {}, {}
    precisions = [p for p in PRECISIONS if any(CONTENDERS[n].precision == p for n in names)]
    try:
        sgemm_program = find_program(sgemm_path, "qkgrad-bench-sgemm")
    except BenchError as e:
        sgemm_program = None
        log(f"warning: no peak, the % of peak columns stay n/a: {e}")
    for precision in precisions:
        peaks[precision], sgemm[precision] = (measure_peak(sgemm_program, precision, args.threads, args.timeout)
                                              if sgemm_program else (None, None))

    started, load_before = time.strftime("%Y-%m-%d %H:%M:%S"), os.getloadavg()
    options, all_runs, summaries, errors = {}, {}, {}, []
    for config in configs:
        o = options[config] = step_options(config, args)
        log(f"config {config}: {args.rounds} round(s) of {' / '.join(names)}, {args.steps} steps each")
        all_runs[config], failed = run_config(config, o, args, qkgrad)
        errors += failed
        summaries[config] = {n: summarize(all_runs[config][n], peaks.get(CONTENDERS[n].precision)) for n in names}
    load_after = os.getloadavg()

    qkgrad_runs = [r for runs in all_runs.values() for n in names if CONTENDERS[n].program == "qkgrad" for r in runs[n]]
    gemm = sorted({r.get("gemm", "openblas") for r in qkgrad_runs}) or ["?"]
    torch_version = next((r["torch_version"] for runs in all_runs.values() for n in names
                          if CONTENDERS[n].program == "torch" for r in runs[n]), "?")
    kinds = " and ".join({"f32": "float32", "bf16": "bf16 mixed precision"}[p] for p in precisions)
    print(f"# qkgrad vs PyTorch {torch_version}: one training step, {kinds}\n")
    rounds = f"{args.rounds} round{'s' if args.rounds > 1 else ''}"
    peak_text = ", ".join(f"{p} {fmt(peaks[p], 1)}" for p in precisions)
    print(f"{machine_line()}; {args.threads} threads each; {rounds} of {' / '.join(titles)}, "
          f"alternating, {args.steps} timed steps after {args.warmup_steps} warm-up per run; medians over the rounds. "
          f"Peak GFLOP/s (qkgrad-bench-sgemm: the best one-thread product × threads): {peak_text}; each contender's "
          f"% of peak is against its precision's. qkgrad's float32 GEMM: {', '.join(gemm)}. Started {started}; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after.\n")
    print(environment_line() + "\n")
    if "torch" in uses:
        print("BLAS, precision and environment of the PyTorch workers:")
        print("\n".join(blas_lines(all_runs, names)) + "\n")
    for config in configs:
        print(f"## {config_title(config, options[config])}\n")
        print(config_table(summaries[config], names, args.rounds))
        loads = [r["load_average_before"] for runs in all_runs[config].values() for r in runs]
        if loads:
            print(f"\n1-minute load average at the start of the runs: {min(loads):.2f}–{max(loads):.2f} "
                  f"({os.cpu_count()} CPUs; a load near or above the CPU count means the runs shared the machine)")
        print()
    print("## Summary (target tokens per second, medians; a ratio above 1: the first is faster)\n")
    print(summary_table(summaries, names) + "\n")
    checks, checks_passed = check_lines(all_runs, options, names)
    print("Checks:")
    print("\n".join(checks))
    failures = failure_lines(errors)
    if failures:
        print("\n".join(failures))
    if args.json:
        raw = {"started": started, "machine": machine_line(), "load_average": [load_before, load_after],
               "settings": vars(args), "contenders": {n: CONTENDERS[n]._asdict() for n in names},
               "environment": {k: os.environ.get(k) for k in OPENBLAS_FORCING}, "peaks": peaks, "sgemm": sgemm,
               "configs": {c: {"options": vars(options[c]), "flops_per_step": flops_per_step(options[c]),
                               "runs": all_runs[c], "summary": summaries[c]} for c in configs}, "errors": errors}
        with open(args.json, "w") as f:
            json.dump(raw, f, indent=1)
        log(f"raw results written to {args.json}")
    return 0 if checks_passed and not errors else 1


# ---- check: the same model, the same step ----

CHECK_CONFIGS = [  # small and uneven (S ≠ T, F not a multiple of D) so that a mixed-up term shows
    dict(layers=1, d_model=96, heads=3, ffn=160, vocab=700, batch=6, src_len=27, tgt_len=19),
    dict(layers=2, d_model=64, heads=4, ffn=96, vocab=300, batch=9, src_len=13, tgt_len=21),
]


def profiled_matmul_flops(torch, o):
    """The FLOPs of every matrix product (aten::mm, addmm, bmm, baddbmm) PyTorch runs in one step."""
    from torch.profiler import ProfilerActivity, profile

    bench = TorchStep(torch, o)
    bench.step()
    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        bench.step()
    return sum(e.flops or 0 for e in prof.events() if e.name in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"))


def run_check(argv):
    parser = argparse.ArgumentParser(prog="compare_torch.py check",
                                     description="Check that the PyTorch step is qkgrad-bench's step.")
    parser.add_argument("--qkgrad", default="build/bench/qkgrad-bench", metavar="PATH")
    args = parser.parse_args(argv)
    qkgrad = find_program(args.qkgrad, "qkgrad-bench")
    torch = import_torch()
    ok = True
    bf16_flag = program_has_flag(qkgrad, "--precision")
    if not bf16_flag:
        print(f"note  {qkgrad} has no --precision flag: its bf16 step is not checked")

    def verdict(good, text):
        nonlocal ok
        ok = ok and good
        print(f"{'ok  ' if good else 'FAIL'}  {text}")

    for values in CHECK_CONFIGS:
        for attn in ("qknorm", "scaled_dot"):
            o = argparse.Namespace(**values, steps=5, warmup_steps=1, threads=1, attn=attn, dropout=0.0)
            name = (f"{o.layers}+{o.layers} layers, d {o.d_model}, {o.heads} heads, ffn {o.ffn}, vocab {o.vocab}, "
                    f"{o.batch} × {o.src_len}/{o.tgt_len}, {attn}")
            formula = flops_per_step(o)
            try:
                result, _ = run_json([qkgrad, "--json"] + step_flags(o), dict(os.environ), 600)
            except RuntimeError as e:
                verdict(False, f"{name}: qkgrad-bench failed: {e}")
                continue
            value, bound = recovered_flops(result)
            verdict(flop_formula_agrees(result, o),
                    f"{name}: qkgrad-bench's gflops × median_ms = {value:,.0f} ± {bound:,.0f} FLOP/step, "
                    f"this script's formula {formula:,.0f}")
            if bf16_flag:  # the bf16 contender times the same products (in bf16): the same count
                try:
                    result, _ = run_json([qkgrad, "--json"] + step_flags(o) + precision_flags("bf16"),
                                         dict(os.environ), 600)
                    value, bound = recovered_flops(result)
                    verdict(flop_formula_agrees(result, o) and result.get("precision") == "bf16",
                            f"{name}: qkgrad-bench --precision bf16 ({result.get('precision')}): gflops × median_ms "
                            f"= {value:,.0f} ± {bound:,.0f} FLOP/step, the formula {formula:,.0f}")
                except RuntimeError as e:
                    verdict(False, f"{name}: qkgrad-bench --precision bf16 failed: {e}")
            torch.set_num_threads(1)
            executed = profiled_matmul_flops(torch, o)
            verdict(executed == formula, f"{name}: PyTorch executes {executed:,} FLOP of matrix products "
                                         f"(profiler, forward + backward), the formula says {formula:,.0f}")
            model = build_model(torch, o)
            shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
            expected = expected_parameters(o)
            count, expected_count = sum(p.numel() for p in model.parameters()), parameter_count(expected)
            detail = "" if shapes == expected else (
                f"; missing {sorted(set(expected) - set(shapes))}, extra {sorted(set(shapes) - set(expected))}, "
                f"other shape {sorted(n for n in set(shapes) & set(expected) if shapes[n] != expected[n])}")
            verdict(shapes == expected and count == expected_count,
                    f"{name}: PyTorch has {len(shapes)} tensors, {count:,} parameters; docs/checkpoint.md's list "
                    f"{len(expected)} tensors, {expected_count:,}{detail}")
    for precision in PRECISIONS:
        bench = TorchStep(torch, argparse.Namespace(**CHECK_CONFIGS[0], attn="qknorm", dropout=0.0, precision=precision))
        losses = [bench.step() for _ in range(5)]
        logits, loss = bench.dtypes
        verdict(all(map(math.isfinite, losses)) and losses[-1] < losses[0]
                and (logits, loss) == (("bfloat16" if precision == "bf16" else "float32"), "float32"),
                f"PyTorch's {'autocast bf16' if precision == 'bf16' else 'float32'} step trains: loss "
                f"{' → '.join(f'{x:.4f}' for x in losses)} (ln V = {math.log(700):.4f}); logits {logits}, loss {loss}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


# ---- attention: the fused QKNorm op against PyTorch's composed version ----

def torch_attention_worker(argv):
    """Times PyTorch's QKNorm (or scaled dot-product) attention composed from its ops, forward +
    backward, on qkgrad-bench-attention's inputs: q, k, v [B, T, H·d] (heads side by side in the
    last dim, as the model's projections produce them), one scalar g, a ones seed for ȳ."""
    parser = argparse.ArgumentParser(prog="compare_torch.py torch-attention")
    parser.add_argument("--shape", default="16,8,64,64")
    parser.add_argument("--causal", choices=["yes", "no"], default="no")
    parser.add_argument("--mode", choices=["qknorm", "scaled_dot"], default="qknorm")
    parser.add_argument("--reps", type=at_least(1), default=15)
    parser.add_argument("--threads", type=at_least(1), default=2)
    o = parser.parse_args(argv)
    B, H, T, d = (int(x) for x in o.shape.split(","))
    torch = import_torch()
    qt = model_module()
    torch.set_num_threads(o.threads)
    torch.manual_seed(1)
    q, k, v = (torch.randn(B, T, H * d, requires_grad=True) for _ in range(3))
    g = torch.tensor(math.log2(T * T - T) if T > 1 else 1.0, requires_grad=True)
    seed = torch.ones(B, T, H * d)
    hidden = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1) if o.causal == "yes" else None

    def attention():  # the model's attention op (qkgrad_torch.attend), "out of the box" ops as in torch-step
        heads = lambda x: x.view(B, T, H, d).transpose(1, 2)  # noqa: E731  [B, H, T, d]
        out = qt.attend(heads(q), heads(k), heads(v), g, o.mode == "qknorm", hidden, ops="library",
                        zero_empty_rows=False)  # [B, H, T, d]
        return out.transpose(1, 2).reshape(B, T, H * d)

    ms = []
    for r in range(o.reps + 1):  # the first repetition warms up and is dropped, as in qkgrad's
        for x in (q, k, v, g):
            x.grad = None
        t0 = time.perf_counter()
        attention().backward(seed)
        if r > 0:
            ms.append((time.perf_counter() - t0) * 1000.0)
    ordered = sorted(ms)
    print(json.dumps({"framework": "torch", "b": B, "h": H, "t": T, "d": d, "causal": o.causal == "yes",
                      "mode": o.mode, "threads": torch.get_num_threads(), "train_ms": ordered[len(ordered) // 2],
                      "train_ms_min": ordered[0], "train_ms_max": ordered[-1], "torch_version": torch.__version__}))
    return 0


ATTENTION_CONTENDERS = ("qkgrad", "torch", "torch-tuned")  # all float32


def run_attention(argv):
    parser = argparse.ArgumentParser(
        prog="compare_torch.py attention",
        description="The fused attention op (qkgrad-bench-attention) against PyTorch's composed version, forward + "
                    "backward, float32, alternating qkgrad / torch / torch-tuned for --rounds rounds (PyTorch "
                    f"without {' and '.join(OPENBLAS_FORCING)}, as in the driver).")
    parser.add_argument("--shape", default="16,8,64,64", help="B,H,T,d (default 16,8,64,64)")
    parser.add_argument("--causal", choices=["yes", "no"], default="no")
    parser.add_argument("--mode", choices=["qknorm", "scaled_dot"], default="qknorm")
    parser.add_argument("--rounds", type=at_least(1), default=5, metavar="N")
    parser.add_argument("--reps", type=at_least(1), default=15, metavar="N", help="timed repetitions per run")
    parser.add_argument("--threads", type=at_least(1), default=2, metavar="N")
    parser.add_argument("--qkgrad", default="build/bench/qkgrad-bench-attention", metavar="PATH")
    args = parser.parse_args(argv)
    try:
        B, H, T, d = (int(x) for x in args.shape.split(","))
        assert min(B, H, T, d) > 0
    except (ValueError, AssertionError):
        parser.error(f"--shape must be four positive integers B,H,T,d, got '{args.shape}'")
    qkgrad = find_program(args.qkgrad, "qkgrad-bench-attention")
    flags = ["--shape", args.shape, "--causal", args.causal, "--mode", args.mode, "--reps", str(args.reps),
             "--threads", str(args.threads)]
    commands = {"qkgrad": [qkgrad, "--json"] + flags,
                "torch": [sys.executable, os.path.abspath(__file__), "torch-attention"] + flags,
                "torch-tuned": [sys.executable, os.path.abspath(__file__), "torch-attention"] + flags}
    times = {c: [] for c in ATTENTION_CONTENDERS}
    for r in range(1, args.rounds + 1):
        for contender in ATTENTION_CONTENDERS:
            try:
                result, _ = run_json(commands[contender], contender_env(contender), 600)
            except RuntimeError as e:
                raise BenchError(f"attention round {r} {contender}: {e}") from None
            times[contender].append(result["train_ms"])
            log(f"[attention {r}/{args.rounds}] {contender:<13} {result['train_ms']:8.2f} ms forward + backward")
    med = {c: statistics.median(times[c]) for c in ATTENTION_CONTENDERS}
    print(f"# Fused {args.mode} attention vs PyTorch's composed version: forward + backward\n")
    print(f"{machine_line()}; B, H, T, d = {B}, {H}, {T}, {d}; causal {args.causal}; float32; {args.threads} threads; "
          f"{args.rounds} rounds alternating, each the median of {args.reps} repetitions; medians over the rounds.\n")
    print("| contender | ms (median) | min–max over rounds | qkgrad's speed-up over it |")
    print("|---|--:|--:|--:|")
    for c in ATTENTION_CONTENDERS:
        print(f"| {CONTENDERS[c].title} | {med[c]:.2f} | {min(times[c]):.2f}–{max(times[c]):.2f} "
              f"| {med[c] / med['qkgrad']:.2f}× |")
    return 0


# ---- gpu: qkgrad-bench --device cuda against torch-step --device cuda ----

GPU_CONTENDERS = ("qkgrad", "torch")


def program_has_flag(program, flag, timeout=60):
    """Whether `program --help` mentions flag (an older qkgrad-bench has no --device)."""
    try:
        done = subprocess.run([program, "--help"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return flag in done.stdout + done.stderr


def gpu_table(o, attns, runs, torch_info):
    """The Markdown report of the gpu subcommand: one row per attention, medians over the rounds."""
    med = lambda rs, key: statistics.median(r[key] for r in rs) if rs else None  # noqa: E731
    tf32 = "on for both (QKGRAD_CUDA_TF32=1)" if tf32_wanted() else "off for both"
    where = (f"{torch_info.get('gpu', 'GPU unknown')} (PyTorch's CUDA {torch_info.get('torch_cuda', '?')}, TF32 {tf32})"
             if o.device == "cuda" else f"{machine_line()} (--device cpu: a test of this subcommand, not a GPU)")
    peak_key = "peak_device_mb" if o.device == "cuda" else "peak_rss_mb"
    lines = [f"# qkgrad vs PyTorch {torch_info.get('torch_version', '?')} on the {o.device.upper()}: one training step\n",
             f"{where}; "
             f"{o.layers}+{o.layers} layers, d {o.d_model}, {o.heads} heads, ffn {o.ffn}, vocab {o.vocab}, "
             f"{o.batch} × {o.src_len}/{o.tgt_len} tokens, dropout {o.dropout:g}, float32, "
             f"{flops_per_step(o) / 1e9:.2f} GFLOP per step; {o.rounds} round(s) of qkgrad / PyTorch alternating, "
             f"each a fresh process, {o.steps} timed steps after {o.warmup_steps} warm-up; medians over the rounds.\n",
             "| attention | qkgrad ms/step (min–max) | PyTorch ms/step (min–max) | qkgrad tok/s | PyTorch tok/s "
             "| qkgrad GFLOP/s | PyTorch ÷ qkgrad time | peak memory MB qkgrad / PyTorch | rounds |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for attn in attns:
        q, t = runs[attn]["qkgrad"], runs[attn]["torch"]
        span = lambda rs: (f"{fmt(med(rs, 'median_ms'), 2)} ({fmt(min(r['median_ms'] for r in rs), 2)}–"  # noqa: E731
                           f"{fmt(max(r['median_ms'] for r in rs), 2)})" if rs else "failed")
        peak = lambda rs: fmt(max(r.get(peak_key, math.nan) for r in rs), 0) if rs else "n/a"  # noqa: E731
        lines.append(f"| {attn} | {span(q)} | {span(t)} | {fmt(med(q, 'tgt_tokens_per_s'))} "
                     f"| {fmt(med(t, 'tgt_tokens_per_s'))} | {fmt(med(q, 'gflops'), 1)} "
                     f"| {fmt(ratio(med(t, 'median_ms'), med(q, 'median_ms')), 2, '×')} | {peak(q)} / {peak(t)} "
                     f"| {len(q)} / {len(t)} |")
    return "\n".join(lines)


def gpu_check_lines(o, attns, runs):
    """Checks on every result of the gpu subcommand: both really ran on the GPU, the same work."""
    lines, passed = [], True
    for attn in attns:
        q, t = runs[attn]["qkgrad"], runs[attn]["torch"]
        oa = argparse.Namespace(**{**vars(o), "attn": attn})
        checks = [
            (all(r.get("device", "cpu") == o.device for r in q + t), f"both report device {o.device}"),
            (all(flop_formula_agrees(r, oa) for r in q), "qkgrad's gflops × median_ms agrees with the FLOP formula"),
            (all(r.get("matches_checkpoint_md") for r in t), "PyTorch's parameters match docs/checkpoint.md"),
            (all(r.get("final_loss") is not None and math.isfinite(r["final_loss"]) for r in t),
             "PyTorch's loss is finite"),
            (len(q) == len(t) == o.rounds, f"all {o.rounds} round(s) of each ran")]
        bad = [text for good, text in checks if not good]
        passed = passed and not bad
        lines.append(f"- {attn}: " + ("all checks pass (" + "; ".join(text for _, text in checks) + ")" if not bad
                                      else "CHECK FAILED: NOT " + "; NOT ".join(bad)))
    return lines, passed


def run_gpu(argv):
    parser = argparse.ArgumentParser(
        prog="compare_torch.py gpu",
        description="qkgrad-bench --device cuda against this script's torch-step --device cuda (TF32 off, or on for "
                    "both with QKGRAD_CUDA_TF32=1), "
                    "alternating qkgrad / PyTorch for --rounds rounds per attention; a Markdown table on stdout, "
                    "progress on stderr, every raw result appended to --jsonl. Defaults: config B (the paper's "
                    "base size), 30 timed steps after 5 warm-up.")
    b = CONFIGS["B"]
    for flag, minimum, default in (("--layers", 1, b["layers"]), ("--d-model", 1, b["d_model"]),
                                   ("--heads", 1, b["heads"]), ("--ffn", 1, b["ffn"]), ("--vocab", 5, b["vocab"]),
                                   ("--batch", 1, b["batch"]), ("--src-len", 1, b["src_len"]),
                                   ("--tgt-len", 1, b["tgt_len"]), ("--steps", 1, 30), ("--warmup-steps", 0, 5),
                                   ("--threads", 0, 0), ("--rounds", 1, 3)):
        parser.add_argument(flag, type=at_least(minimum), default=default, metavar="N")
    parser.add_argument("--attn", default="qknorm,scaled_dot", help="comma-separated: qknorm, scaled_dot")
    parser.add_argument("--dropout", type=probability, default=0.0, metavar="P")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cuda (default); cpu only to test this subcommand on a machine without a GPU")
    parser.add_argument("--qkgrad", default="build-gpu/bench/qkgrad-bench", metavar="PATH")
    parser.add_argument("--timeout", type=at_least(1), default=180, metavar="S", help="seconds per run (default 180)")
    parser.add_argument("--budget", type=at_least(0), default=0, metavar="S",
                        help="start no new run after S seconds (0: no limit); the table shows what ran")
    parser.add_argument("--jsonl", metavar="FILE", help="append every raw result to FILE, one JSON line each")
    o = parser.parse_args(argv)
    attns = [a.strip() for a in o.attn.split(",") if a.strip()]
    if not attns or any(a not in ("qknorm", "scaled_dot") for a in attns):
        parser.error(f"--attn: choose from qknorm, scaled_dot (comma-separated), got '{o.attn}'")
    if o.d_model % o.heads:
        parser.error(f"--d-model {o.d_model} is not divisible by --heads {o.heads}")
    qkgrad = find_program(o.qkgrad, "qkgrad-bench")
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        raise BenchError(TORCH_HINT)
    errors = []
    qkgrad_ok = o.device == "cpu" or program_has_flag(qkgrad, "--device")
    if not qkgrad_ok:
        errors.append(f"{qkgrad} has no --device flag (its --help does not mention it): this qkgrad-bench cannot "
                      "run on the GPU (bench/bench_train.cpp predates --device); only PyTorch was timed")
        log(f"ERROR: {errors[-1]}")
    started = time.monotonic()
    runs = {a: {c: [] for c in GPU_CONTENDERS} for a in attns}
    torch_info = {}
    commands = {}
    for attn in attns:
        step = argparse.Namespace(**{k: getattr(o, k) for k in ("layers", "d_model", "heads", "ffn", "vocab", "batch",
                                                               "src_len", "tgt_len", "steps", "warmup_steps",
                                                               "threads", "dropout", "device")}, attn=attn)
        commands[attn] = {"qkgrad": [qkgrad, "--json"] + step_flags(step),
                          "torch": [sys.executable, os.path.abspath(__file__), "torch-step", "--json"] + step_flags(step)}
    # Round by round, each attention's qkgrad then PyTorch: a spent --budget still leaves a
    # comparison of every attention.
    for r in range(1, o.rounds + 1):
        for attn in attns:
            for contender in GPU_CONTENDERS:
                if contender == "qkgrad" and not qkgrad_ok:
                    continue
                if o.budget and time.monotonic() - started > o.budget:
                    errors.append(f"{attn} round {r} {contender}: not run, the --budget of {o.budget} s was spent")
                    log(f"[{attn} {r}/{o.rounds}] {contender}: skipped (--budget {o.budget} s spent)")
                    continue
                try:
                    result, seconds = run_json(commands[attn][contender], dict(os.environ), o.timeout)
                except RuntimeError as e:
                    errors.append(f"{attn} round {r} {contender}: {e}")
                    log(f"[{attn} {r}/{o.rounds}] {contender}: FAILED: {e}")
                    continue
                result.update(contender=contender, round=r, wall_s=round(seconds, 1))
                if contender == "torch":
                    torch_info = result
                runs[attn][contender].append(result)
                if o.jsonl:
                    with open(o.jsonl, "a") as f:
                        f.write(json.dumps(result) + "\n")
                memory = result.get("peak_device_mb", result.get("peak_rss_mb"))
                log(f"[{attn} {r}/{o.rounds}] {contender:<6} {result['median_ms']:9.2f} ms/step "
                    f"{result['tgt_tokens_per_s']:10.0f} tok/s {result['gflops']:8.1f} GFLOP/s "
                    f"{fmt(memory)} MB  ({seconds:.0f} s)")
    print(gpu_table(o, attns, runs, torch_info) + "\n")
    checks, passed = gpu_check_lines(o, attns, runs)
    print("Checks:")
    print("\n".join(checks))
    for error in errors:
        lines = [line for line in error.splitlines() if line.strip()]
        print(f"- FAILED: {lines[0]}" + (f" — {lines[-1].strip()}" if len(lines) > 1 else ""))
    return 0 if passed and not errors else 1


def main(argv):
    if argv and argv[0] in ("lm", "lm-step"):  # the language model's step: bench/compare_torch_lm.py
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import compare_torch_lm
        return compare_torch_lm.main(argv[1:] if argv[0] == "lm" else argv)
    if argv and argv[0] == "torch-step":
        return run_worker(argv[1:])
    if argv and argv[0] == "check":
        return run_check(argv[1:])
    if argv and argv[0] == "torch-attention":
        return torch_attention_worker(argv[1:])
    if argv and argv[0] == "attention":
        return run_attention(argv[1:])
    if argv and argv[0] == "gpu":
        return run_gpu(argv[1:])
    return run_driver(argv)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BenchError as error:
        print(f"compare_torch.py: error: {error}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
