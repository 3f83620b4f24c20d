#!/usr/bin/env python3
"""qkgrad's decoder-only language model (nn/language_model.h) in PyTorch, for bench/compare_torch.py lm.

The same architecture and sizes: byte embeddings (256), PreNorm blocks with RMSNorm (eps 1e-6),
causal self-attention with RoPE (the half-split form, ops/rope.cpp) in any of the four modes
(scaled_dot; qknorm: l2-normalised q and k times a learned g; rms_qknorm / layer_qknorm: an
RMSNorm / LayerNorm of each head of q and k with learned gains, before the rotation, as qkgrad-lm's
default qk_norm_position), a GELU (tanh) feed-forward layer, biases on every projection, a final
RMSNorm and logits against the tied embedding. Written the way a PyTorch user would: nn.Linear,
F.embedding, and F.scaled_dot_product_attention (PyTorch's fused attention, the strongest
baseline) with is_causal=True where the PyTorch has it (2.1 and later; Debian 12's 1.13 has not:
there matmul, masked_fill and softmax). Initialisation is not qkgrad's; it does not matter for speed.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

MODES = ("scaled_dot", "qknorm", "rms_qknorm", "layer_qknorm")


def rms_norm(x, gain, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return rms_norm(x, self.gamma)


def rope_tables(T, d, base=10000.0):
    """cos and sin of p·θᵢ, θᵢ = base^(−2i/d), as [T, d/2]."""
    m = d // 2
    theta = base ** (-2.0 * torch.arange(m, dtype=torch.float64) / d)
    angles = torch.arange(T, dtype=torch.float64)[:, None] * theta[None, :]
    return torch.cos(angles).float(), torch.sin(angles).float()


def rope(x, cos, sin):
    """x [B, H, T, d]: pairs (i, i + d/2) turned by p·θᵢ."""
    a, b = x.chunk(2, dim=-1)
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


class Attention(nn.Module):
    def __init__(self, d, heads, mode, length):
        super().__init__()
        self.heads, self.mode = heads, mode
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))
        h = d // heads
        if mode == "qknorm":
            self.g = nn.Parameter(torch.tensor(math.log2(length * length - length)))
        if mode in ("rms_qknorm", "layer_qknorm"):
            self.q_gain, self.k_gain = nn.Parameter(torch.ones(h)), nn.Parameter(torch.ones(h))
        if mode == "layer_qknorm":
            self.q_bias, self.k_bias = nn.Parameter(torch.zeros(h)), nn.Parameter(torch.zeros(h))

    def forward(self, x, cos, sin):
        B, T, D = x.shape
        split = lambda t: t.view(B, T, self.heads, D // self.heads).transpose(1, 2)  # [B, H, T, d]
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        scale = None
        if self.mode == "rms_qknorm":
            q, k = rms_norm(q, self.q_gain), rms_norm(k, self.k_gain)
        elif self.mode == "layer_qknorm":
            h = D // self.heads
            q = F.layer_norm(q, (h,), self.q_gain, self.q_bias, 1e-6)
            k = F.layer_norm(k, (h,), self.k_gain, self.k_bias, 1e-6)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        if self.mode == "qknorm":
            q, k, scale = F.normalize(q, dim=-1) * self.g, F.normalize(k, dim=-1), 1.0
        return self.out_proj(causal_attention(q, k, v, scale).transpose(1, 2).reshape(B, T, D))


def causal_attention(q, k, v, scale=None):
    """softmax(q kᵀ · scale + causal mask) v over [B, H, T, d]; scale None: 1/√d. PyTorch's fused
    F.scaled_dot_product_attention where it has one with a scale (2.1 and later), else composed."""
    try:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
    except (AttributeError, TypeError):  # PyTorch 1.13 (Debian 12's): no fused attention
        T = q.shape[-2]
        s = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
        return torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v


class Block(nn.Module):
    def __init__(self, d, heads, ffn, mode, length):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
        self.attn = Attention(d, heads, mode, length)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.norm1(x), cos, sin)
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x)), approximate="tanh"))


class LanguageModel(nn.Module):
    def __init__(self, layers, d, heads, ffn, mode, context):
        super().__init__()
        self.embedding = nn.Parameter(torch.randn(256, d) * d ** -0.5)
        self.blocks = nn.ModuleList(Block(d, heads, ffn, mode, context) for _ in range(layers))
        self.final_norm = RMSNorm(d)
        cos, sin = rope_tables(context, d // heads)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)

    def forward(self, ids):  # [B, T] -> logits [B, T, 256]
        x = F.embedding(ids, self.embedding)
        T = ids.shape[1]
        for block in self.blocks:
            x = block(x, self.cos[:T], self.sin[:T])
        return self.final_norm(x) @ self.embedding.t()


def no_decay(name):
    """The parameters qkgrad's AdamW leaves without weight decay (LanguageModel::no_weight_decay)."""
    return any(part in name for part in ("norm", "bias", "attn.g", "_gain"))
