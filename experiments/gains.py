#!/usr/bin/env python3
"""The learned query-key gains of a trained run, read from its best checkpoint.

    experiments/gains.py RUN_DIR [CHECKPOINT]      (CHECKPOINT: best (default) or last)

One line per attention module (docs/checkpoint.md names the tensors):
  qknorm        g (every head's, with per-head g);
  rms_qknorm    γ_q ⊙ γ_k (the only thing its logits see: docs/qknorm-attention.md) as min / mean /
                max, and max |γ_q − γ_k| (equal gains get equal gradients, so they stay equal);
  layer_qknorm  the same, and max |β_q| and max |β_k| (β_k has no effect: its gradient is 0).
The checkpoints are not committed, so experiments/qknorm_vs_scaled_dot.sh keeps this output
(gains.txt) with each finished run's records. Standard library only; a malformed checkpoint
ends it with an error that names the file (tests/test_experiment_helpers.py).
"""
import array
import json
import math
import os
import struct
import sys


def read_safetensors(path):
    """name -> (shape, list of floats) for every F32 / F64 tensor of a safetensors file.
    A malformed file ends the program with an error naming the file and what is wrong."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        sys.exit(f"error: {path}: too short for a safetensors file ({len(blob)} bytes)")
    n = struct.unpack("<Q", blob[:8])[0]
    if 8 + n > len(blob):
        sys.exit(f"error: {path}: its header length {n} runs past the end of the file ({len(blob)} bytes)")
    try:
        header = json.loads(blob[8:8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        sys.exit(f"error: {path}: its header is not JSON ({e})")
    if not isinstance(header, dict):
        sys.exit(f"error: {path}: its header is not a JSON object")
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__" or not isinstance(meta, dict) or meta.get("dtype") not in ("F32", "F64"):
            continue
        tensors[name] = (meta.get("shape"), tensor_values(path, blob, 8 + n, name, meta))
    return tensors


def tensor_values(path, blob, data_start, name, meta):
    """The floats of one tensor; its data_offsets (relative to data_start) must lie in the file."""
    size = 4 if meta["dtype"] == "F32" else 8
    offsets = meta.get("data_offsets")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(x, int) for x in offsets)):
        sys.exit(f"error: {path}: tensor {name} has no data_offsets [begin, end]")
    begin, end = offsets
    if not 0 <= begin <= end <= len(blob) - data_start or (end - begin) % size:
        sys.exit(f"error: {path}: tensor {name}'s data_offsets {offsets} do not fit the file's "
                 f"{len(blob) - data_start} data bytes in whole {meta['dtype']} values")
    values = array.array("f" if size == 4 else "d")
    values.frombytes(blob[data_start + begin:data_start + end])
    if sys.byteorder != "little":
        values.byteswap()
    return values.tolist()


def partner(path, tensors, name):
    """The values of tensor NAME, which the checkpoint must hold beside its query-side twin."""
    if name not in tensors:
        sys.exit(f"error: {path}: {name} is missing (docs/checkpoint.md: a query gain comes with a key gain)")
    return tensors[name][1]


def module_lines(path, tensors):
    """One line per attention module with learned gains (the module docstring says what each shows)."""
    lines = []
    for name in sorted(tensors):
        shape, values = tensors[name]
        if not values and (name.endswith("attn.g") or name.endswith("q_norm.gamma")):
            sys.exit(f"error: {path}: {name} holds no values")
        if name.endswith("attn.g"):  # [] or [H] (per-head g)
            lines.append(f"{name.rsplit('.', 1)[0]}: g " + " ".join(f"{g:.3f}" for g in values))
        elif name.endswith("q_norm.gamma"):  # [d] or [H, d]
            module = name[: -len(".q_norm.gamma")]
            gq, gk = values, partner(path, tensors, module + ".k_norm.gamma")
            if len(gk) != len(gq):
                sys.exit(f"error: {path}: {name} has {len(gq)} values but {module}.k_norm.gamma has {len(gk)}")
            d = shape[-1] if isinstance(shape, list) and shape else len(gq)
            prod = [a * b for a, b in zip(gq, gk)]
            mean = sum(prod) / len(prod)
            line = (f"{module}: γ_q⊙γ_k min {min(prod):.3f} mean {mean:.3f} max {max(prod):.3f}"
                    f" (√d·mean {math.sqrt(d) * mean:.2f}); max|γ_q−γ_k| "
                    f"{max(abs(a - b) for a, b in zip(gq, gk)):.2g}")
            if module + ".q_norm.beta" in tensors:
                bq = tensors[module + ".q_norm.beta"][1]
                bk = partner(path, tensors, module + ".k_norm.beta")
                line += f"; max|β_q| {max(map(abs, bq), default=0):.3f}, max|β_k| {max(map(abs, bk), default=0):.4f}"
            lines.append(line)
    return lines


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    run = sys.argv[1]
    which = sys.argv[2] if len(sys.argv) == 3 else "best"
    path = os.path.join(run, "checkpoints", which, "model.safetensors")
    if not os.path.isfile(path):
        sys.exit(f"error: {path} not found: is {run} a qkgrad-translate run with a '{which}' checkpoint?")
    lines = module_lines(path, read_safetensors(path))
    if not lines:
        print(f"{path}: no learned attention gains (scaled_dot has none)")
        return
    print(f"learned attention gains in {path}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
