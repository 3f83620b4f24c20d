#!/usr/bin/env python3
"""Cross-checks qkgrad's loss and gradients against an independent PyTorch implementation.

    python3 tools/torch_reference.py --checkpoint DIR --dump FILE [--dtype float64|float32]
                                     [--tolerance X]

DIR is a qkgrad checkpoint (config.json + model.safetensors, docs/checkpoint.md). FILE is a
gradient dump written by qkgrad::translate::write_gradient_dump (translation/grad_dump.h):
one batch ("src", "src_lengths", "tgt_in", "tgt_out", "tgt_lengths"), the loss qkgrad computed
for it ("loss") and the gradient of every parameter ("grad.<name>"); its metadata gives the
label smoothing, the pad id and the number of target tokens.

The script rebuilds the model in PyTorch from the equations of docs/checkpoint.md alone
(tools/qkgrad_torch.py, the model shared with bench/compare_torch.py, here with
ops="composed": every equation written out with elementary ops; nothing of qkgrad's code is
used), loads the checkpoint's weights into it (converted to --dtype, float64 by default),
runs the dump's batch with dropout off, computes

    loss = Σ over non-pad target tokens of CE_ε(logits, target) / (number of those tokens),
    CE_ε = −Σ_c q_c log softmax(logits)_c,   q = (1 − ε)·onehot(target) + ε/V,

calls backward, and compares the loss and every gradient with the dump. Files are read with
NumPy + struct + json (no safetensors package); nothing touches the network.

The error of a tensor is its largest elementwise relative error, with a floor (a: qkgrad,
b: PyTorch):

    err = max_i |a_i − b_i| / max(|b_i|, floor),   floor = 1e-3 · G,
    G = the largest |entry| of all the reference gradients together (the model's gradient scale)

(the floor is at least 1e-30; the loss is compared by its plain relative error). Rounding
errors of a gradient entry scale with the magnitudes of the terms summed into it, not with the
entry itself: an entry that cancels to nearly 0 has no meaningful relative error of its own.
Some gradients are exactly 0 in exact arithmetic and pure rounding noise in both programs: the
key-projection bias under scaled dot-product attention (the softmax ignores a shift shared by
all keys), and, with ScaleNorm and QKNorm, the gain of the decoder's norm2, whose output feeds
only the cross-attention's query projection: while that projection's bias is 0 (as
initialised) the gain only scales the query, which QKNorm l2-normalises. Such entries are
measured against the floor instead; every entry at least 1e-3 · G is compared by its own
relative error.

PyTorch's F.cross_entropy(label_smoothing=ε, ignore_index=pad) uses the same q as qkgrad's
cross_entropy; the script checks this on every run against the explicit sum above (a
"self-check" line) and fails if they differ.

Default tolerance: 1e-9 when both sides compute in float64 (the dump's gradients are float64
and --dtype float64; observed errors are ~1e-13), 1e-3 when either side is float32 (qkgrad's
float32 against the float64 reference: observed errors up to ~1e-4 on small models).

Output: one line per tensor (the loss first, then the gradients in the dump's order) with its
error, then a summary line. Exit status: 0 if every error is within the tolerance, 1 if one is
not (or the reference's own label-smoothing self-check fails), 2 for usage errors and for
missing, unreadable or mismatched input files.
"""

import argparse
import json
import math
import os
import struct
import sys

TOLERANCE_F64 = 1e-9
TOLERANCE_F32 = 1e-3
FLOOR_FRACTION = 1e-3
FLOOR_MINIMUM = 1e-30


class InputError(Exception):
    """A problem with the command line or the input files (exit status 2)."""


# ---- reading safetensors files with NumPy (docs/safetensors.md) ----

def load_safetensors(path):
    """Returns ({name: numpy array}, metadata, {name: safetensors dtype}) for a safetensors file."""
    import numpy as np

    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file")
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise InputError(f"{path}: {len(blob)} bytes is too short for a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])  # the header length, little-endian u64
    if n > len(blob) - 8:
        raise InputError(f"{path}: the header claims {n} bytes but the file has only {len(blob) - 8} after the length")
    try:
        header = json.loads(blob[8:8 + n])
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: the header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise InputError(f"{path}: the header is not a JSON object")
    data = blob[8 + n:]
    metadata = header.pop("__metadata__", {}) or {}
    dtypes = {"F32": "<f4", "F64": "<f8", "I64": "<i8"}
    tensors, kinds = {}, {}
    for name, info in header.items():
        try:
            kind, shape, (begin, end) = info["dtype"], list(info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{path}: tensor '{name}' has a malformed header entry: {info!r}") from None
        if not all(isinstance(d, int) and d >= 0 for d in shape) or not all(isinstance(o, int) for o in (begin, end)):
            raise InputError(f"{path}: tensor '{name}' has a malformed shape or data_offsets: {info!r}")
        if kind not in dtypes:
            raise InputError(f"{path}: tensor '{name}' has dtype {kind}; only F32, F64 and I64 are read")
        count = math.prod(shape)
        if not (0 <= begin <= end <= len(data)) or end - begin != count * np.dtype(dtypes[kind]).itemsize:
            raise InputError(f"{path}: tensor '{name}' claims bytes [{begin}, {end}) for shape {shape}; "
                             f"the data section has {len(data)} bytes (truncated or corrupt file)")
        tensors[name] = np.frombuffer(data[begin:end], dtype=dtypes[kind]).reshape(shape)
        kinds[name] = kind
    return tensors, metadata, kinds


def read_config(directory):
    path = os.path.join(directory, "config.json")
    if not os.path.isdir(directory):
        raise InputError(f"{directory}: no such checkpoint directory")
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file (is {directory} a qkgrad checkpoint?)")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except ValueError as e:
        raise InputError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(config, dict) or config.get("format") != "qkgrad-checkpoint" or not isinstance(config.get("model"), dict):
        raise InputError(f"{path}: not a qkgrad checkpoint config (expected \"format\": \"qkgrad-checkpoint\" and a \"model\" object)")
    model = config["model"]
    needed = ["vocab", "d_model", "heads", "ffn", "encoder_layers", "decoder_layers", "norm", "attention",
              "per_head_g", "fixnorm", "pad_id"]
    missing = [key for key in needed if key not in model]
    if missing:
        raise InputError(f"{path}: the model config lacks {', '.join(missing)}")
    for key in ("vocab", "d_model", "heads", "ffn", "encoder_layers", "decoder_layers"):
        if not isinstance(model[key], int) or isinstance(model[key], bool) or model[key] < 1:
            raise InputError(f"{path}: \"{key}\" must be a positive integer, got {model[key]!r}")
    if model["norm"] not in ("layer_norm", "scale_norm"):
        raise InputError(f"{path}: unknown norm \"{model['norm']}\"")
    if model["attention"] not in ("qknorm", "scaled_dot", "rms_qknorm", "layer_qknorm"):
        raise InputError(f"{path}: unknown attention \"{model['attention']}\"")
    if model["d_model"] % model["heads"] != 0:
        raise InputError(f"{path}: d_model {model['d_model']} is not divisible by heads {model['heads']}")
    return config


# ---- the model: tools/qkgrad_torch.py ----

def import_model_module():
    """tools/qkgrad_torch.py, the PyTorch model shared with bench/compare_torch.py (it imports torch,
    so it is imported only once the inputs have been checked). It lies next to this script: its
    directory is put first on sys.path (Python does so itself for a script, not for an import)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import qkgrad_torch
    return qkgrad_torch


# ---- comparing ----

def relative_error(a, b, floor):
    """max_i |a_i − b_i| / max(|b_i|, floor), in float64; inf if either side is not finite."""
    import numpy as np

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.size == 0:
        return 0.0
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return math.inf
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), floor)))


def compare(dump, reference):
    """[(name, error, max |reference|)] for the loss and every gradient (see the top for the floor)."""
    import numpy as np

    scale = max((float(np.max(np.abs(b))) for name, b in reference.items() if name.startswith("grad.") and b.size),
                default=0.0)
    floor = max(FLOOR_FRACTION * scale, FLOOR_MINIMUM)
    rows = []
    for name, b in reference.items():
        rows.append((name, relative_error(dump[name], b, FLOOR_MINIMUM if name == "loss" else floor),
                     float(np.max(np.abs(b))) if b.size else 0.0))
    return rows, floor


def check_batch(dump, metadata, dump_path, cfg):
    """The dump's batch, validated; returns (src, src_lengths, tgt_in, tgt_out, tgt_lengths, ε, pad, tokens)."""
    import numpy as np

    for name in ("src", "src_lengths", "tgt_in", "tgt_out", "tgt_lengths", "loss"):
        if name not in dump:
            raise InputError(f"{dump_path}: no tensor '{name}' (is this a qkgrad gradient dump?)")
    if dump["loss"].shape != () or dump["loss"].dtype.kind != "f":
        raise InputError(f"{dump_path}: 'loss' must be a floating-point scalar, got {list(dump['loss'].shape)} {dump['loss'].dtype}")
    for key in ("smoothing", "pad_id", "tokens"):
        if key not in metadata:
            raise InputError(f"{dump_path}: no metadata '{key}' (is this a qkgrad gradient dump?)")
    src, tgt_in, tgt_out = dump["src"], dump["tgt_in"], dump["tgt_out"]
    src_lengths, tgt_lengths = dump["src_lengths"], dump["tgt_lengths"]
    for name, ids in (("src", src), ("tgt_in", tgt_in), ("tgt_out", tgt_out)):
        if ids.dtype != np.int64 or ids.ndim != 2:
            raise InputError(f"{dump_path}: '{name}' must be [B, T] int64, got {list(ids.shape)} {ids.dtype}")
        if ids.size and (ids.min() < 0 or ids.max() >= cfg["vocab"]):
            raise InputError(f"{dump_path}: '{name}' holds ids outside the vocabulary [0, {cfg['vocab']})")
    batch = src.shape[0]
    if tgt_in.shape != tgt_out.shape or tgt_in.shape[0] != batch:
        raise InputError(f"{dump_path}: shapes src {list(src.shape)}, tgt_in {list(tgt_in.shape)}, "
                         f"tgt_out {list(tgt_out.shape)} do not fit together")
    for name, lengths, width in (("src_lengths", src_lengths, src.shape[1]), ("tgt_lengths", tgt_lengths, tgt_in.shape[1])):
        if lengths.shape != (batch,) or (batch and (lengths.min() < 0 or lengths.max() > width)):
            raise InputError(f"{dump_path}: '{name}' must be [{batch}] lengths in [0, {width}], got {lengths.tolist()}")
    try:
        smoothing, pad_id, tokens = float(metadata["smoothing"]), int(metadata["pad_id"]), int(metadata["tokens"])
    except ValueError:
        raise InputError(f"{dump_path}: malformed metadata {metadata}") from None
    if pad_id != cfg["pad_id"]:
        raise InputError(f"{dump_path}: pad_id {pad_id} differs from the checkpoint's {cfg['pad_id']}")
    if tokens != int(np.sum(tgt_out != pad_id)):
        raise InputError(f"{dump_path}: metadata says {tokens} target tokens but tgt_out has {int(np.sum(tgt_out != pad_id))} non-pad entries")
    return src, src_lengths, tgt_in, tgt_out, tgt_lengths, smoothing, pad_id, tokens


def main(argv):
    parser = argparse.ArgumentParser(
        description="Recompute a qkgrad gradient dump in PyTorch and compare the loss and every gradient.",
        epilog="Exit status: 0 all within tolerance, 1 some not, 2 usage or input error.")
    parser.add_argument("--checkpoint", required=True, metavar="DIR", help="checkpoint directory (config.json, model.safetensors)")
    parser.add_argument("--dump", required=True, metavar="FILE", help="gradient dump from write_gradient_dump")
    parser.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                        help="dtype of the PyTorch reference (default float64; the weights are converted)")
    parser.add_argument("--tolerance", type=float, metavar="X",
                        help=f"largest accepted relative error (default {TOLERANCE_F64:g} when both sides are float64, "
                             f"{TOLERANCE_F32:g} otherwise)")
    args = parser.parse_args(argv)  # exits with status 2 on usage errors
    if args.tolerance is not None and not args.tolerance > 0:
        parser.error(f"--tolerance must be > 0, got {args.tolerance}")

    try:
        import numpy as np
    except ImportError:
        raise InputError("NumPy is not installed (apt-get install python3-numpy)") from None

    config = read_config(args.checkpoint)
    cfg = config["model"]
    weights_path = os.path.join(args.checkpoint, "model.safetensors")
    weights, weights_meta, _ = load_safetensors(weights_path)
    if "id" in config and weights_meta.get("id") not in (None, config["id"]):
        raise InputError(f"{weights_path}: id {weights_meta.get('id')} differs from config.json's {config['id']} (files from different saves)")
    dump, dump_meta, dump_kinds = load_safetensors(args.dump)
    src, src_lengths, tgt_in, tgt_out, tgt_lengths, smoothing, pad_id, tokens = check_batch(dump, dump_meta, args.dump, cfg)

    grad_kinds = {kind for name, kind in dump_kinds.items() if name.startswith("grad.")}
    if len(grad_kinds) != 1 or not grad_kinds <= {"F32", "F64"}:
        raise InputError(f"{args.dump}: the gradients must all be F32 or all F64, got {sorted(grad_kinds) or 'none'}")
    qkgrad_f64 = grad_kinds == {"F64"}
    if cfg.get("dtype", "f64" if qkgrad_f64 else "f32") != ("f64" if qkgrad_f64 else "f32"):
        raise InputError(f"{args.dump}: its gradients are {grad_kinds.pop()} but the checkpoint's model is {cfg['dtype']}")
    tolerance = args.tolerance if args.tolerance is not None else (
        TOLERANCE_F64 if qkgrad_f64 and args.dtype == "float64" else TOLERANCE_F32)

    try:
        import torch
    except ImportError:
        raise InputError("PyTorch is not installed (apt-get install python3-torch)") from None
    qt = import_model_module()
    dtype = torch.float64 if args.dtype == "float64" else torch.float32

    # The checkpoint's model, every equation composed of elementary ops (as docs/checkpoint.md
    # writes them), P = 0 for rows that see no key (the dump's batch may hold an empty source),
    # positions computed for each batch in --dtype, no dropout.
    model = qt.Seq2SeqTransformer(qt.ModelConfig.from_checkpoint(cfg, ops="composed", zero_empty_rows=True,
                                                                 position_table=None), dtype=dtype)
    expected = {name: tuple(p.shape) for name, p in model.named_parameters()}
    found = {name: tuple(a.shape) for name, a in weights.items()}
    if expected != found:
        missing = sorted(set(expected) - set(found))
        extra = sorted(set(found) - set(expected))
        wrong = sorted(n for n in set(expected) & set(found) if expected[n] != found[n])
        parts = ([f"missing {missing}"] if missing else []) + ([f"unexpected {extra}"] if extra else []) + \
                [f"'{n}' is {list(found[n])}, expected {list(expected[n])}" for n in wrong]
        raise InputError(f"{weights_path} does not match the model that config.json describes "
                         f"(docs/checkpoint.md): {'; '.join(parts)}")
    dump_grads = {name[len("grad."):] for name in dump if name.startswith("grad.")}
    if dump_grads != set(expected):
        missing = sorted("grad." + n for n in set(expected) - dump_grads)
        extra = sorted("grad." + n for n in dump_grads - set(expected))
        parts = ([f"missing {missing}"] if missing else []) + ([f"unexpected {extra}"] if extra else [])
        raise InputError(f"{args.dump}: its gradients do not match the checkpoint's parameters "
                         f"({'; '.join(parts)}); are the dump and the checkpoint from the same model?")
    for name, shape in expected.items():
        if tuple(dump["grad." + name].shape) != shape:
            raise InputError(f"{args.dump}: 'grad.{name}' is {list(dump['grad.' + name].shape)}, the parameter is {list(shape)}")
    model.load_state_dict({name: torch.from_numpy(np.array(a)).to(dtype) for name, a in weights.items()}, strict=True)
    model.eval()

    # The dump's batch, with dropout off.
    src, src_lengths, tgt_in, tgt_out, tgt_lengths = (torch.from_numpy(np.array(a)) for a in
                                                      (src, src_lengths, tgt_in, tgt_out, tgt_lengths))
    logits = model(src, src_lengths, tgt_in, tgt_lengths)  # [B, T, V]
    vocab = logits.shape[-1]
    flat_logits, flat_targets = logits.reshape(-1, vocab), tgt_out.reshape(-1)
    loss = qt.label_smoothed_cross_entropy(flat_logits, flat_targets, pad_id, smoothing, tokens=tokens)

    # Self-check: PyTorch's label_smoothing is qkgrad's q = (1 − ε)·onehot + ε/V (ignored rows excluded).
    with torch.no_grad():
        explicit = qt.explicit_label_smoothed_cross_entropy(flat_logits, flat_targets, pad_id, smoothing, tokens)
        self_check = abs(float(explicit) - float(loss)) / max(abs(float(explicit)), 1e-30)
    loss.backward()

    # The reference values, under the dump's names, in the dump's order.
    params = dict(model.named_parameters())
    reference = {"loss": loss.detach().numpy()}
    for name in (name for name in dump if name.startswith("grad.")):
        p = params[name[len("grad."):]]
        reference[name] = (p.grad if p.grad is not None else torch.zeros_like(p)).numpy()
    rows, floor = compare(dump, reference)

    qkgrad_dtype = "float64" if qkgrad_f64 else "float32"
    print(f"qkgrad {qkgrad_dtype} vs PyTorch {torch.__version__} {args.dtype}: {cfg['attention']}, {cfg['norm']}, "
          f"fixnorm {'on' if cfg['fixnorm'] else 'off'}, batch {list(src.shape)} -> {list(tgt_in.shape)}, "
          f"{tokens} tokens, smoothing {smoothing:g}")
    print(f"loss: qkgrad {float(dump['loss']):.17g}, PyTorch {float(loss):.17g}")
    self_check_tolerance = 1e-12 if args.dtype == "float64" else 1e-5
    self_check_ok = self_check <= self_check_tolerance
    print(f"self-check: F.cross_entropy(label_smoothing) vs explicit (1-e)*onehot + e/V: rel err {self_check:.1e} "
          f"{'ok' if self_check_ok else 'MISMATCH'}")
    width = max(len(name) for name, _, _ in rows)
    for name, err, size in rows:
        print(f"  {name:<{width}}  max rel err {err:.2e}  (max |ref| {size:.2e})  {'ok' if err <= tolerance else 'FAIL'}")
    worst_name, worst, _ = max(rows, key=lambda row: row[1])
    failed = [name for name, err, _ in rows if not err <= tolerance]
    verdict = "PASS" if not failed and self_check_ok else "FAIL"
    print(f"{verdict}: {len(rows) - len(failed)} of {len(rows)} tensors (loss + {len(rows) - 1} gradients) within "
          f"tolerance {tolerance:g}; largest relative error {worst:.2e} ({worst_name}); "
          f"floor {floor:.2e} = {FLOOR_FRACTION:g} x the largest reference gradient entry")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except InputError as error:
        print(f"torch_reference.py: error: {error}", file=sys.stderr)
        sys.exit(2)
