"""qkgrad's Seq2SeqTransformer in PyTorch: the one PyTorch model of the repository.

Used by tools/torch_reference.py (rebuilds a checkpoint's model and cross-checks a gradient
dump) and bench/compare_torch.py (times PyTorch's training step against qkgrad-bench's). The
equations are docs/checkpoint.md's; nothing of qkgrad's code is used. Parameter names and
shapes are those of docs/checkpoint.md's tensor list (and of qkgrad's named_parameters()), so a
checkpoint's model.safetensors loads with load_state_dict(strict=True).

    cfg = ModelConfig(vocab=..., d_model=..., heads=..., ffn=..., encoder_layers=...,
                      decoder_layers=..., norm="layer_norm", attention="qknorm", ...)
    model = Seq2SeqTransformer(cfg)                      # float32 unless dtype= says otherwise
    logits = model(src, src_lengths, tgt_in, tgt_lengths)  # [B, T, V], teacher forcing
    loss = label_smoothed_cross_entropy(logits.reshape(-1, V), tgt_out.reshape(-1), pad_id, 0.1)

What the model computes is fixed by the first group of ModelConfig fields (the checkpoint's
config.json "model" object). The second group chooses only how PyTorch computes it; the two
callers want different things, and each passes its choice explicitly:

  ops="composed"   (torch_reference.py) every equation written out with elementary tensor ops,
                   as docs/checkpoint.md states them and as qkgrad's layers compute them:
                   LayerNorm as mean / biased variance / sqrt, l2 normalisation as
                   x / max(‖x‖, ε), FixNorm applied to the looked-up rows and, separately, to E
                   for the logits (nn/layers.cpp), embedding lookup by indexing, logits x Êᵀ.
  ops="library"    (compare_torch.py) "PyTorch out of the box": F.layer_norm, F.normalize,
                   Ê = F.normalize(E) once per forward, then F.embedding(ids, Ê) and F.linear(y, Ê).
                   The same function; rounding, gradient accumulation order and speed differ.
  zero_empty_rows  True: an attention row whose keys are all hidden (a source of length 0) gets
                   P = 0 instead of NaN (qkgrad's fused attention does this; torch_reference's
                   dumps contain such rows). False: two masked_fill ops fewer per attention,
                   for callers whose lengths are all >= 1 (compare_torch's batches).
  position_table   None: the sinusoidal positions are computed at each forward for the batch's
                   lengths, in the embeddings' dtype (float64 stays float64). An int L: a table
                   of L rows is computed once at construction, in dtype, and sliced each forward
                   (a non-persistent buffer; the model must then not be cast to another dtype).
  dropout, attention_dropout, ffn_dropout
                   qkgrad's TransformerConfig rates (residual branches and embeddings, attention
                   probabilities, FFN hidden layer), active only in train() mode and when > 0;
                   at 0 no dropout op is built at all.

Initialisation (only compare_torch.py uses it; torch_reference.py overwrites every parameter
from the checkpoint): E ~ N(0, 1/D) as qkgrad's, nn.Linear's PyTorch default, LayerNorm γ = 1,
β = 0, ScaleNorm g = √D, QKNorm g = g_init. Parameters are created in a fixed order (embedding,
then each encoder layer, encoder.norm, each decoder layer, decoder.norm), so torch.manual_seed
gives the same weights on every run.

This module imports torch at the top: the scripts import it only after their own checks.
"""

import math
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

LAYER_NORM_EPS = 1e-5  # nn/layers.cpp: LayerNorm and ScaleNorm
SCALE_NORM_EPS = 1e-5
QKNORM_EPS = 1e-6      # ops/attention.h: the l2 normalisation of q and k (and the eps of rms_qknorm / layer_qknorm)
FIXNORM_EPS = 1e-12    # nn/layers.cpp: the l2 normalisation of the embedding rows


@dataclass(frozen=True)
class ModelConfig:
    """The model (qkgrad's TransformerConfig, nn/transformer.h) and how PyTorch computes it."""

    # What is computed (docs/checkpoint.md, config.json's "model" object).
    vocab: int
    d_model: int
    heads: int
    ffn: int
    encoder_layers: int
    decoder_layers: int
    norm: str = "layer_norm"       # "layer_norm" or "scale_norm"
    attention: str = "qknorm"      # "qknorm", "scaled_dot", "rms_qknorm" or "layer_qknorm"
    per_head_g: bool = False       # QKNorm: one gain per head ([H]) instead of one per module ([]);
                                   # rms_qknorm / layer_qknorm: the norms' gains and biases [H, d], not [d]
    fixnorm: bool = True           # l2-normalised embedding rows, for the inputs and the tied logits
    activation: str = "relu"       # the feed-forward activation: "relu" or "gelu" (tanh form)
    g_init: float = 1.0            # QKNorm's initial gain (qkgrad: log2(L² − L))
    dropout: float = 0.0           # embeddings and every residual branch
    attention_dropout: float = 0.0  # the attention probabilities
    ffn_dropout: float = 0.0       # the FFN's hidden layer
    # How PyTorch computes it (see the module's docstring).
    ops: str = "composed"          # "composed" or "library"
    zero_empty_rows: bool = True
    position_table: Optional[int] = None

    def __post_init__(self):
        if self.norm not in ("layer_norm", "scale_norm"):
            raise ValueError(f"unknown norm {self.norm!r}")
        if self.attention not in ("qknorm", "scaled_dot", "rms_qknorm", "layer_qknorm"):
            raise ValueError(f"unknown attention {self.attention!r}")
        if self.activation not in ("relu", "gelu"):
            raise ValueError(f"unknown activation {self.activation!r}")
        if self.ops not in ("composed", "library"):
            raise ValueError(f"unknown ops {self.ops!r}: 'composed' or 'library'")
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by heads {self.heads}")

    @classmethod
    def from_checkpoint(cls, model, **how):
        """The config of a checkpoint's config.json "model" object (docs/checkpoint.md), plus `how`."""
        keys = ("vocab", "d_model", "heads", "ffn", "encoder_layers", "decoder_layers", "norm", "attention",
                "per_head_g", "fixnorm")
        added = {"activation": "relu"}  # keys of later hyperparameters: an older checkpoint lacks them
        return cls(**{key: model[key] for key in keys}, **{key: model.get(key, value) for key, value in added.items()},
                   **how)


# ---- elementary pieces ----

def dropout(x, p, training):
    """F.dropout when training with p > 0; otherwise x itself (no op in the graph). ops/regularization.cpp."""
    return F.dropout(x, p, training) if training and p > 0 else x


def l2_normalize(x, eps, ops):
    """x / max(‖x‖, eps) over the last dim (ops/normalization.cpp: l2_normalize)."""
    if ops == "library":
        return F.normalize(x, dim=-1, eps=eps)
    return x / x.norm(dim=-1, keepdim=True).clamp_min(eps)


class LayerNorm(nn.Module):
    """γ ⊙ (x − μ) / √(σ² + ε) + β over the last dim, biased variance, ε = 1e-5 (nn/layers.h)."""

    def __init__(self, d, ops):
        super().__init__()
        self.ops = ops
        self.gamma = nn.Parameter(torch.ones(d))
        self.beta = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        if self.ops == "library":
            return F.layer_norm(x, (x.shape[-1],), self.gamma, self.beta, LAYER_NORM_EPS)
        mu = x.mean(dim=-1, keepdim=True)
        var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
        return self.gamma * (x - mu) / torch.sqrt(var + LAYER_NORM_EPS) + self.beta


class ScaleNorm(nn.Module):
    """g · x / max(‖x‖, ε), one scalar g initialised to √D, ε = 1e-5 (nn/layers.h: ScaleNorm)."""

    def __init__(self, d, ops):
        super().__init__()
        self.ops = ops
        self.g = nn.Parameter(torch.tensor(math.sqrt(d)))

    def forward(self, x):
        return self.g * l2_normalize(x, SCALE_NORM_EPS, self.ops)


def make_norm(cfg):
    """The config's norm layer (nn/layers.h: make_norm)."""
    return LayerNorm(cfg.d_model, cfg.ops) if cfg.norm == "layer_norm" else ScaleNorm(cfg.d_model, cfg.ops)


# ---- attention ----

def key_padding_mask(lengths, keys):
    """[B, 1, 1, Tk] bool: True where key j is padding (j >= lengths[b])."""
    return (torch.arange(keys, device=lengths.device)[None, :] >= lengths[:, None])[:, None, None, :]


def causal_mask(length, device):
    """[T, T] bool: True where key j is in query i's future (j > i)."""
    return torch.ones(length, length, dtype=torch.bool, device=device).triu(1)


def attend(q, k, v, g, qknorm, hidden, ops, zero_empty_rows=False, p_dropout=0.0, training=False):
    """The attention op of ops/attention.h on heads already split: q [B, H, Tq, d], k, v [B, H, Tk, d].

    QKNorm: S = g · q̂ k̂ᵀ with the rows of q and k l2-normalised (ε = 1e-6; ops is ModelConfig.ops);
    g is [] or [H] (one per head). Scaled dot-product: S = q kᵀ / √d (g unused). hidden (bool,
    broadcast over [B, H, Tq, Tk], True = masked; or None) is set to −inf before the softmax;
    with zero_empty_rows a row that sees no key gets P = 0 instead of NaN. P is dropped out with
    p_dropout when training. Returns P V [B, H, Tq, d]. bench/compare_torch.py's `attention`
    subcommand times this function alone against qkgrad's fused op.
    """
    if qknorm:
        gain = g.reshape(-1, 1, 1) if g.dim() == 1 else g  # [H, 1, 1] broadcasts over [B, H, Tq, Tk]
        s = gain * (l2_normalize(q, QKNORM_EPS, ops) @ l2_normalize(k, QKNORM_EPS, ops).transpose(-1, -2))
    else:
        s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    empty = None
    if hidden is not None:
        if zero_empty_rows:
            empty = hidden.all(dim=-1, keepdim=True)
        s = s.masked_fill(hidden, float("-inf"))
        if empty is not None:
            s = s.masked_fill(empty, 0.0)
    p = torch.softmax(s, dim=-1)
    if empty is not None:
        p = p.masked_fill(empty, 0.0)
    return dropout(p, p_dropout, training) @ v


class HeadNorm(nn.Module):
    """rms_qknorm's and layer_qknorm's norm of each head's rows x [B, H, T, d] (ops/attention.h):
    γ ⊙ x / √(mean(x²) + ε), or γ ⊙ (x − μ) / √(σ² + ε) + β (biased σ²), ε = 1e-6; γ and β are [d]
    (shared by the heads) or [H, d] (per_head_g), named gamma and beta as in docs/checkpoint.md."""

    def __init__(self, cfg, with_bias):
        super().__init__()
        d = cfg.d_model // cfg.heads
        shape = (cfg.heads, d) if cfg.per_head_g else (d,)
        self.gamma = nn.Parameter(torch.ones(shape))
        self.beta = nn.Parameter(torch.zeros(shape)) if with_bias else None

    def forward(self, x):
        per_row = (lambda p: p[:, None, :]) if self.gamma.dim() == 2 else (lambda p: p)  # [H, d] -> [H, 1, d]
        if self.beta is None:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + QKNORM_EPS) * per_row(self.gamma)
        c = x - x.mean(-1, keepdim=True)
        return c * torch.rsqrt(c.pow(2).mean(-1, keepdim=True) + QKNORM_EPS) * per_row(self.gamma) + per_row(self.beta)


class MultiHeadAttention(nn.Module):
    """Four projections around attend() (nn/multihead_attention.h): y = attend(a W_qᵀ, m W_kᵀ, m W_vᵀ) W_oᵀ.

    The QKNorm gain g is [] (or [H] with per_head_g); rms_qknorm and layer_qknorm normalise each
    head's q and k (q_norm, k_norm: HeadNorm) and then attend as scaled dot-product; scaled
    dot-product attention has no parameters of its own.
    """

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.heads = cfg.heads
        self.qknorm = cfg.attention == "qknorm"
        d = cfg.d_model
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))
        if self.qknorm:
            self.g = nn.Parameter(torch.full((cfg.heads,), cfg.g_init) if cfg.per_head_g else torch.tensor(cfg.g_init))
        self.head_norms = cfg.attention in ("rms_qknorm", "layer_qknorm")
        if self.head_norms:
            self.q_norm = HeadNorm(cfg, cfg.attention == "layer_qknorm")
            self.k_norm = HeadNorm(cfg, cfg.attention == "layer_qknorm")

    def split_heads(self, x):  # [B, T, H·d] -> [B, H, T, d]
        b, t, _ = x.shape
        return x.view(b, t, self.heads, -1).transpose(1, 2)

    def forward(self, a, m, hidden):  # a [B, Tq, D] attends to m [B, Tk, D]; hidden: True = masked
        b, tq = a.shape[0], a.shape[1]
        q, k = self.split_heads(self.q_proj(a)), self.split_heads(self.k_proj(m))
        if self.head_norms:
            q, k = self.q_norm(q), self.k_norm(k)
        o = attend(q, k, self.split_heads(self.v_proj(m)), self.g if self.qknorm else None, self.qknorm, hidden,
                   self.cfg.ops, self.cfg.zero_empty_rows, self.cfg.attention_dropout, self.training)
        return self.out_proj(o.transpose(1, 2).reshape(b, tq, -1))  # the heads side by side again


# ---- layers ----

class FeedForward(nn.Module):
    """fc2(dropout(act(fc1(x)))), act relu or gelu, [B, T, D] -> [B, T, F] -> [B, T, D] (nn/layers.h: FeedForward)."""

    def __init__(self, cfg):
        super().__init__()
        self.p = cfg.ffn_dropout
        self.gelu = cfg.activation == "gelu"
        self.fc1 = nn.Linear(cfg.d_model, cfg.ffn)
        self.fc2 = nn.Linear(cfg.ffn, cfg.d_model)

    def forward(self, x):
        h = self.fc1(x)
        return self.fc2(dropout(F.gelu(h, approximate="tanh") if self.gelu else torch.relu(h), self.p, self.training))


class EncoderLayer(nn.Module):
    """Pre-norm: x += drop(self_attn(norm1 x)); x += drop(ffn(norm2 x)) (nn/transformer.cpp: EncoderLayer)."""

    def __init__(self, cfg):
        super().__init__()
        self.p = cfg.dropout
        self.norm1 = make_norm(cfg)
        self.self_attn = MultiHeadAttention(cfg)
        self.norm2 = make_norm(cfg)
        self.ffn = FeedForward(cfg)

    def forward(self, x, src_hidden):
        n = self.norm1(x)
        x = x + dropout(self.self_attn(n, n, src_hidden), self.p, self.training)
        return x + dropout(self.ffn(self.norm2(x)), self.p, self.training)


class DecoderLayer(nn.Module):
    """Pre-norm: causal self-attention, cross-attention to the memory, FFN (nn/transformer.cpp: DecoderLayer)."""

    def __init__(self, cfg):
        super().__init__()
        self.p = cfg.dropout
        self.norm1 = make_norm(cfg)
        self.self_attn = MultiHeadAttention(cfg)
        self.norm2 = make_norm(cfg)
        self.cross_attn = MultiHeadAttention(cfg)
        self.norm3 = make_norm(cfg)
        self.ffn = FeedForward(cfg)

    def forward(self, y, tgt_hidden, memory, src_hidden):
        n = self.norm1(y)
        y = y + dropout(self.self_attn(n, n, tgt_hidden), self.p, self.training)
        y = y + dropout(self.cross_attn(self.norm2(y), memory, src_hidden), self.p, self.training)
        return y + dropout(self.ffn(self.norm3(y)), self.p, self.training)


class Stack(nn.Module):
    """`count` layers and the final norm (the names encoder.layers.i..., encoder.norm)."""

    def __init__(self, layer, count, cfg):
        super().__init__()
        self.layers = nn.ModuleList(layer(cfg) for _ in range(count))
        self.norm = make_norm(cfg)


class TiedEmbedding(nn.Module):
    """E [V, D], tied (nn/layers.h: Embedding): inputs √D · Ê[ids], logits x Êᵀ; Ê = E with FixNorm's
    l2-normalised rows (ε = 1e-12), else E.

    table() is what embed() and logits() read in one forward: with ops="composed" E itself (each
    use normalises what it reads, as qkgrad does), with ops="library" Ê, normalised once.
    """

    def __init__(self, cfg):
        super().__init__()
        self.ops, self.fixnorm = cfg.ops, cfg.fixnorm
        self.weight = nn.Parameter(torch.randn(cfg.vocab, cfg.d_model) / math.sqrt(cfg.d_model))

    def rows(self, e):
        return l2_normalize(e, FIXNORM_EPS, self.ops) if self.fixnorm else e

    def table(self):
        return self.weight if self.ops == "composed" else self.rows(self.weight)

    def embed(self, ids, table):  # ids [B, T] -> [B, T, D]
        scale = math.sqrt(self.weight.shape[1])
        if self.ops == "composed":
            return scale * self.rows(table[ids])
        return scale * F.embedding(ids, table)

    def logits(self, x, table):  # [B, T, D] -> [B, T, V]
        if self.ops == "composed":
            return x @ self.rows(table).t()
        return F.linear(x, table)


def sinusoidal_positions(length, d, dtype):
    """PE[t, 2i] = sin(t / 10000^(2i/D)), PE[t, 2i+1] = cos(t / 10000^(2i/D)), computed in float64,
    returned in dtype (ops/regularization.cpp: sinusoidal_positions)."""
    t = torch.arange(length, dtype=torch.float64)[:, None]
    j = torch.arange(d)
    angle = t / torch.pow(torch.tensor(10000.0, dtype=torch.float64), (j - j % 2).double() / d)
    return torch.where(j % 2 == 0, torch.sin(angle), torch.cos(angle)).to(dtype)


class Seq2SeqTransformer(nn.Module):
    """The encoder-decoder of nn/transformer.h: logits = decoder.norm(decoder(embed(tgt_in), memory)) Êᵀ
    with memory = encoder.norm(encoder(embed(src))); embed = √D · Ê[ids] + positions, dropped out."""

    def __init__(self, cfg, dtype=torch.float32):
        super().__init__()
        self.cfg = cfg
        self.embedding = TiedEmbedding(cfg)
        self.encoder = Stack(EncoderLayer, cfg.encoder_layers, cfg)
        self.decoder = Stack(DecoderLayer, cfg.decoder_layers, cfg)
        self.to(dtype)
        self.table_dtype = None
        if cfg.position_table is not None:
            self.register_buffer("positions", sinusoidal_positions(cfg.position_table, cfg.d_model, dtype),
                                 persistent=False)
            self.table_dtype = dtype

    def position_rows(self, length, dtype):
        if self.table_dtype is None:
            return sinusoidal_positions(length, self.cfg.d_model, dtype)
        if self.positions.dtype != self.table_dtype:
            raise RuntimeError(f"the position table was built in {self.table_dtype} but the model has been cast to "
                               f"{self.positions.dtype}: build it with dtype= (or position_table=None) instead")
        if length > self.positions.shape[0]:
            raise ValueError(f"a sequence of {length} tokens is longer than the position table "
                             f"({self.positions.shape[0]} rows; ModelConfig.position_table)")
        return self.positions[:length]

    def embed_with_positions(self, ids, table):
        x = self.embedding.embed(ids, table)
        return dropout(x + self.position_rows(ids.shape[1], x.dtype), self.cfg.dropout, self.training)

    def forward(self, src, src_lengths, tgt_in, tgt_lengths):  # -> logits [B, T, V]
        src_hidden = key_padding_mask(src_lengths, src.shape[1])  # [B, 1, 1, S]
        tgt_hidden = key_padding_mask(tgt_lengths, tgt_in.shape[1]) | causal_mask(tgt_in.shape[1], tgt_in.device)
        table = self.embedding.table()
        x = self.embed_with_positions(src, table)
        for layer in self.encoder.layers:
            x = layer(x, src_hidden)
        memory = self.encoder.norm(x)
        y = self.embed_with_positions(tgt_in, table)
        for layer in self.decoder.layers:
            y = layer(y, tgt_hidden, memory, src_hidden)
        return self.embedding.logits(self.decoder.norm(y), table)


# ---- the loss ----

def label_smoothed_cross_entropy(logits, targets, pad_id, smoothing, tokens=None):
    """Label-smoothed cross-entropy of logits [N, V] against targets [N], pad entries ignored:
    CE_ε = −Σ_c q_c log softmax(logits)_c, q = (1 − ε)·onehot(target) + ε/V (ops/loss.cpp).

    tokens given: Σ CE_ε / tokens, as qkgrad's training step and gradient dump compute it;
    tokens None: PyTorch's reduction="mean" (the same quotient, PyTorch's rounding).
    """
    if tokens is None:
        return F.cross_entropy(logits, targets, ignore_index=pad_id, label_smoothing=smoothing)
    return F.cross_entropy(logits, targets, ignore_index=pad_id, label_smoothing=smoothing, reduction="sum") / tokens


def explicit_label_smoothed_cross_entropy(logits, targets, pad_id, smoothing, tokens):
    """The same loss with q written out, Σ over non-pad rows / tokens: checks F.cross_entropy's label_smoothing."""
    keep = targets != pad_id
    log_p = torch.log_softmax(logits[keep], dim=-1)
    q = torch.full_like(log_p, smoothing / logits.shape[-1])
    q[torch.arange(q.shape[0]), targets[keep]] += 1 - smoothing
    return -(q * log_p).sum() / tokens
