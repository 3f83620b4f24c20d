#!/usr/bin/env python3
"""The learned query-key gains of a trained run, read from its best checkpoint.

    experiments/gains.py RUN_DIR [CHECKPOINT]      (CHECKPOINT: best (default) or last)

One line per attention module (docs/checkpoint.md names the tensors):
  qknorm        g;
  rms_qknorm    γ_q ⊙ γ_k (the only thing its logits see: docs/qknorm-attention.md) as min / mean /
                max, and max |γ_q − γ_k| (equal gains get equal gradients, so they stay equal);
  layer_qknorm  the same, and max |β_q| and max |β_k| (β_k has no effect: its gradient is 0).
The checkpoints are not committed, so experiments/qknorm_vs_scaled_dot.sh keeps this output
(gains.txt) with each finished run's records. Standard library only.
"""
import array
import json
import math
import os
import struct
import sys


def read_safetensors(path):
    """name -> (shape, list of floats) for every F32 / F64 tensor of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        sys.exit(f"error: {path}: too short for a safetensors file")
    n = struct.unpack("<Q", blob[:8])[0]
    if 8 + n > len(blob):
        sys.exit(f"error: {path}: its header length {n} runs past the end of the file")
    header = json.loads(blob[8:8 + n])
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta.get("dtype") not in ("F32", "F64"):
            continue
        begin, end = meta["data_offsets"]
        values = array.array("f" if meta["dtype"] == "F32" else "d")
        values.frombytes(blob[8 + n + begin:8 + n + end])
        if sys.byteorder != "little":
            values.byteswap()
        tensors[name] = (meta["shape"], values.tolist())
    return tensors


def module_lines(tensors):
    lines = []
    for name in sorted(tensors):
        module = name.rsplit(".", 1)[0]
        if name.endswith("attn.g"):
            lines.append(f"{module}: g {tensors[name][1][0]:.3f}")
        elif name.endswith("q_norm.gamma"):
            module = name[: -len(".q_norm.gamma")]
            gq = tensors[name][1]
            gk = tensors[module + ".k_norm.gamma"][1]
            prod = [a * b for a, b in zip(gq, gk)]
            d = tensors[name][0][-1]
            line = (f"{module}: γ_q⊙γ_k min {min(prod):.3f} mean {sum(prod) / len(prod):.3f} max {max(prod):.3f}"
                    f" (√d·mean {math.sqrt(d) * sum(prod) / len(prod):.2f}); max|γ_q−γ_k| "
                    f"{max(abs(a - b) for a, b in zip(gq, gk)):.2g}")
            if module + ".q_norm.beta" in tensors:
                bq = tensors[module + ".q_norm.beta"][1]
                bk = tensors[module + ".k_norm.beta"][1]
                line += f"; max|β_q| {max(map(abs, bq)):.3f}, max|β_k| {max(map(abs, bk)):.4f}"
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
    lines = module_lines(read_safetensors(path))
    if not lines:
        print(f"{path}: no learned attention gains (scaled_dot has none)")
        return
    print(f"learned attention gains in {path}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
