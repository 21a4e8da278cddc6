#!/usr/bin/python3
"""Independent PyTorch reference for the LLaMA family (docs/models.md: every norm placement, LayerRoPE).

Written from docs/models.md alone, as plain functions over a dict of parameters (no nn.Module),
so that it can serve as the ground truth for lrc's fixtures. Everything is computed in
float64: parameters are stored as f32 in the fixture files and upcast here, so the stored
expected outputs are the exact answer for those f32 inputs (rounded once to f32).

Run directly to print parameter counts at the 60m preset and a few self-checks:
    /usr/bin/python3 tests/reference/llama_ref.py
"""

import math
from collections import OrderedDict
from dataclasses import dataclass

import torch

PLACEMENTS = ("pre", "post", "peri", "lns", "deepnet", "layerrope", "layerrope_peri")
LAYERROPE_SITES = ("in_attn", "in_mlp", "out_attn", "out_mlp")
LAYERROPE_SCALARS = ("alpha", "beta", "alpha_rot", "beta_rot")

# Per-layer RMSNorm weights each placement owns, and which one is used where.
# "read" weights multiply the normalized block input (or, for post/deepnet, the
# normalized residual sum); "write" weights multiply the normalized block output (peri).
_READ_NORMS = {
    "pre": ("input_layernorm", "post_attention_layernorm"),
    "lns": ("input_layernorm", "post_attention_layernorm"),
    "peri": ("input_layernorm", "post_attention_layernorm"),
    "post": ("post_attention_layernorm", "post_feedforward_layernorm"),
    "deepnet": ("post_attention_layernorm", "post_feedforward_layernorm"),
    "layerrope": (),
    "layerrope_peri": (),
}
_WRITE_NORMS = {"peri": ("post_block_norm_attn", "post_block_norm_mlp")}

# DeepNet's residual multiplier uses the constant 2*32 unless deepnet_depth_alpha is set
# (docs/models.md: "a = (2·32)^(1/4) ≈ 2.83, or (2L)^(1/4) with --set deepnet_depth_alpha=true").
_DEEPNET_DEFAULT_2N = 2 * 32


@dataclass
class Config:
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    vocab: int
    norm: str = "pre"
    eps: float = 1e-6
    rope_base: float = 10000.0
    # init values of the LayerRoPE scalars (docs/models.md's defaults); the actual values used by a
    # forward pass are the model.layerrope.* parameters.
    layerrope_alpha: float = 0.0
    layerrope_beta: float = -0.5
    layerrope_alpha_rot: float = 0.0
    layerrope_beta_rot: float = -0.5
    layerrope_base: float = 100.0
    deepnet_depth_alpha: int = 0

    @property
    def head_dim(self):
        assert self.d_model % self.n_heads == 0, "d_model must be a multiple of n_heads"
        return self.d_model // self.n_heads


PRESETS = {  # docs/models.md's presets: d, L, heads, d_ff, vocab
    "60m": (512, 8, 8, 1376, 32000),
    "130m": (768, 12, 12, 2048, 32000),
    "250m": (896, 20, 14, 2389, 32000),
    "500m": (1280, 24, 20, 3413, 32000),
    "1b": (2048, 24, 32, 5461, 32000),
}


def preset(name, norm="pre"):
    d, L, h, ff, v = PRESETS[name]
    return Config(d_model=d, n_layers=L, n_heads=h, d_ff=ff, vocab=v, norm=norm)


# --------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------

def layer_norm_names(norm):
    """Names of the per-layer RMSNorm weights owned by placement `norm`."""
    if norm not in PLACEMENTS:
        raise ValueError("unknown norm placement %r" % norm)
    return _READ_NORMS[norm] + _WRITE_NORMS.get(norm, ())


def param_shapes(cfg):
    """Ordered dict name -> shape of every parameter of the model (nothing allocated)."""
    d, ff, V = cfg.d_model, cfg.d_ff, cfg.vocab
    shapes = OrderedDict()
    shapes["model.embed_tokens.weight"] = (V, d)
    for i in range(cfg.n_layers):
        p = "model.layers.%d." % i
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            shapes[p + "self_attn.%s.weight" % proj] = (d, d)
        shapes[p + "mlp.gate_proj.weight"] = (ff, d)
        shapes[p + "mlp.up_proj.weight"] = (ff, d)
        shapes[p + "mlp.down_proj.weight"] = (d, ff)
        for n in layer_norm_names(cfg.norm):
            shapes[p + n + ".weight"] = (d,)
    if cfg.norm in ("layerrope", "layerrope_peri"):
        # One shared gain vector and four rank-0 scalars per site, for all layers.
        for site in LAYERROPE_SITES:
            shapes["model.layerrope.%s_gamma" % site] = (d,)
            for s in LAYERROPE_SCALARS:
                shapes["model.layerrope.%s_%s" % (site, s)] = ()
    shapes["model.norm.weight"] = (d,)
    shapes["lm_head.weight"] = (V, d)
    return shapes


def param_count(cfg):
    total = 0
    for shape in param_shapes(cfg).values():
        total += math.prod(shape)  # math.prod(()) == 1 for the rank-0 scalars
    return total


# --------------------------------------------------------------------------------------
# Functional ops (all f64 in practice; they work in whatever dtype they are given)
# --------------------------------------------------------------------------------------

def linear(x, w):
    """nn.Linear layout: w is [out, in], y = x @ w.T (no bias anywhere in this model)."""
    return x @ w.t()


def embedding(ids, w):
    return w[ids.long()]


def rms_normalize(x, eps):
    """N(x): RMSNorm without weight, over the last axis; eps inside the square root."""
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)


def silu(x):
    return x * torch.sigmoid(x)


def softmax(x):
    """Softmax over the last axis, shifted by the max for range safety."""
    e = torch.exp(x - x.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)


def rope(x, base):
    """Sequence RoPE, rotate-half convention (HF LLaMA).

    x: [B, T, H, Dh]. Dimension i < Dh/2 is paired with i + Dh/2; the pair at token
    position t (0-based index along T) is rotated by angle t * base^(-2i/Dh).
    """
    T, Dh = x.shape[1], x.shape[-1]
    assert Dh % 2 == 0, "RoPE needs an even head_dim"
    half = Dh // 2
    i = torch.arange(half, dtype=torch.float64)
    inv_freq = torch.tensor(float(base), dtype=torch.float64) ** (-2.0 * i / Dh)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]  # [T, half]
    cos = torch.cos(ang).to(x.dtype)[None, :, None, :]  # broadcast over B and H
    sin = torch.sin(ang).to(x.dtype)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def attention_core(q, k, v, scale, causal=True):
    """Scaled dot-product attention. q, k, v: [B, T, H, Dh] -> [B, T, H, Dh]."""
    s = torch.einsum("bthd,bshd->bhts", q, k) * scale  # [B, H, Tq, Tk]
    if causal:
        T = q.shape[1]
        future = torch.ones(T, T, dtype=torch.bool).triu(1)  # key index > query index
        s = s.masked_fill(future, float("-inf"))
    p = softmax(s)
    return torch.einsum("bhts,bshd->bthd", p, v)


def attention(x, p, prefix, cfg):
    """Self-attention block A(x): projections, head split, RoPE on q and k, causal SDPA.

    Head h owns the contiguous slice [h*Dh, (h+1)*Dh) of the projection output (the
    usual .view(B, T, H, Dh) of HF LLaMA).
    """
    B, T, d = x.shape
    H, Dh = cfg.n_heads, cfg.head_dim
    q = linear(x, p[prefix + "self_attn.q_proj.weight"]).reshape(B, T, H, Dh)
    k = linear(x, p[prefix + "self_attn.k_proj.weight"]).reshape(B, T, H, Dh)
    v = linear(x, p[prefix + "self_attn.v_proj.weight"]).reshape(B, T, H, Dh)
    q, k = rope(q, cfg.rope_base), rope(k, cfg.rope_base)
    o = attention_core(q, k, v, 1.0 / math.sqrt(Dh), causal=True).reshape(B, T, d)
    return linear(o, p[prefix + "self_attn.o_proj.weight"])


def mlp(x, p, prefix):
    """SwiGLU: down(silu(gate(x)) * up(x))."""
    g = linear(x, p[prefix + "mlp.gate_proj.weight"])
    u = linear(x, p[prefix + "mlp.up_proj.weight"])
    return linear(silu(g) * u, p[prefix + "mlp.down_proj.weight"])


def depth_gain(gamma, alpha, beta, alpha_rot, beta_rot, layer, base):
    """LayerRoPE gain g(l) of one site, per docs/models.md's formulas.

    u = log(l+1); r = alpha + beta*u; theta = exp(alpha_rot + beta_rot*u);
    theta_j = theta * base^(-2j/d); interleaved pairs (2j, 2j+1) of gamma are rotated by
    theta_j and scaled by e^r.
    """
    d = gamma.shape[0]
    assert d % 2 == 0, "LayerRoPE needs an even d_model"
    u = math.log(layer + 1.0)
    r = alpha + beta * u
    theta = torch.exp(alpha_rot + beta_rot * u)
    j = torch.arange(d // 2, dtype=gamma.dtype)
    theta_j = theta * torch.tensor(float(base), dtype=gamma.dtype) ** (-2.0 * j / d)
    c, s = torch.cos(theta_j), torch.sin(theta_j)
    g0, g1 = gamma[0::2], gamma[1::2]
    out = torch.empty_like(gamma)
    out[0::2] = torch.exp(r) * (g0 * c - g1 * s)
    out[1::2] = torch.exp(r) * (g0 * s + g1 * c)
    return out


def layerrope_gain(p, site, layer, cfg):
    pre = "model.layerrope.%s_" % site
    return depth_gain(p[pre + "gamma"], p[pre + "alpha"], p[pre + "beta"],
                      p[pre + "alpha_rot"], p[pre + "beta_rot"], layer, cfg.layerrope_base)


def cross_entropy(logits, labels, ignore_index=-100):
    """Mean over non-ignored rows of logsumexp(logits) - logits[label]. logits [N, V]."""
    keep = labels != ignore_index
    lg = logits[keep]
    lab = labels[keep].long()
    m = lg.max(dim=-1, keepdim=True).values
    lse = (m + torch.log(torch.exp(lg - m).sum(dim=-1, keepdim=True))).squeeze(-1)
    return (lse - lg.gather(1, lab[:, None]).squeeze(1)).mean()


def deepnet_alpha(cfg):
    n2 = 2 * cfg.n_layers if cfg.deepnet_depth_alpha else _DEEPNET_DEFAULT_2N
    return float(n2) ** 0.25


# --------------------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------------------

def half_step(h, block, layer, which, p, cfg):
    """One residual half-step (which = 0 attention, 1 MLP) of placement cfg.norm."""
    eps, norm = cfg.eps, cfg.norm
    N = lambda x: rms_normalize(x, eps)  # noqa: E731
    pre = "model.layers.%d." % layer
    if norm in _READ_NORMS and _READ_NORMS[norm]:
        w = p[pre + _READ_NORMS[norm][which] + ".weight"]
    if norm == "pre":
        return h + block(N(h) * w)
    if norm == "lns":
        return h + block(N(h) * w / math.sqrt(layer + 1.0))
    if norm == "peri":
        w_out = p[pre + _WRITE_NORMS["peri"][which] + ".weight"]
        return h + N(block(N(h) * w)) * w_out
    if norm == "post":
        return N(h + block(h)) * w
    if norm == "deepnet":
        return N(deepnet_alpha(cfg) * h + block(h)) * w
    site_in, site_out = (("in_attn", "out_attn"), ("in_mlp", "out_mlp"))[which]
    g_in = layerrope_gain(p, site_in, layer, cfg)
    g_out = layerrope_gain(p, site_out, layer, cfg)
    if norm == "layerrope":
        return h + g_out * block(N(h) * g_in)
    if norm == "layerrope_peri":
        return h + N(block(N(h) * g_in)) * g_out
    raise ValueError("unknown norm placement %r" % norm)


def forward(params, tokens, cfg):
    """Logits [B, T, V] in float64 for int tokens [B, T]."""
    expected = param_shapes(cfg)
    if set(params) != set(expected):
        missing = sorted(set(expected) - set(params))
        extra = sorted(set(params) - set(expected))
        raise ValueError("parameter mismatch: missing %s, unexpected %s" % (missing, extra))
    p = {}
    for name, t in params.items():
        if tuple(t.shape) != tuple(expected[name]):
            raise ValueError("%s has shape %s, expected %s" % (name, tuple(t.shape), expected[name]))
        p[name] = t.to(torch.float64)
    h = embedding(tokens, p["model.embed_tokens.weight"])
    for l in range(cfg.n_layers):
        pre = "model.layers.%d." % l
        h = half_step(h, lambda x: attention(x, p, pre, cfg), l, 0, p, cfg)
        h = half_step(h, lambda x: mlp(x, p, pre), l, 1, p, cfg)
    h = rms_normalize(h, cfg.eps) * p["model.norm.weight"]
    return linear(h, p["lm_head.weight"])


def next_token_loss(logits, tokens):
    """Training loss (docs/models.md): labels are the tokens shifted by one."""
    V = logits.shape[-1]
    return cross_entropy(logits[:, :-1].reshape(-1, V), tokens[:, 1:].reshape(-1))


# --------------------------------------------------------------------------------------
# Self-checks (independent formulations of the trickier pieces)
# --------------------------------------------------------------------------------------

def _self_checks():
    g = torch.Generator().manual_seed(1234)
    # RoPE via complex numbers: pair (x_i, x_{i+Dh/2}) as x_i + i*x_{i+Dh/2}, times e^{i t w_i}.
    x = torch.randn(2, 6, 3, 8, generator=g, dtype=torch.float64)
    half = 4
    w = 500.0 ** (-2.0 * torch.arange(half, dtype=torch.float64) / 8)
    z = torch.complex(x[..., :half], x[..., half:])
    z = z * torch.exp(1j * torch.arange(6, dtype=torch.float64)[None, :, None, None] * w)
    ref = torch.cat([z.real, z.imag], dim=-1)
    assert torch.allclose(rope(x, 500.0), ref, atol=1e-12), "rope"
    # RoPE's defining property: <R_m q, R_n k> depends only on m - n.
    q = torch.randn(8, generator=g, dtype=torch.float64)
    k = torch.randn(8, generator=g, dtype=torch.float64)
    qs = rope(q.expand(1, 6, 1, 8).clone(), 10000.0)[0, :, 0]
    ks = rope(k.expand(1, 6, 1, 8).clone(), 10000.0)[0, :, 0]
    assert abs(qs[4] @ ks[1] - qs[3] @ ks[0]) < 1e-12, "rope relative"
    # depth_gain via complex numbers on interleaved pairs.
    gam = torch.randn(10, generator=g, dtype=torch.float64)
    a, b, ar, br = (torch.tensor(v, dtype=torch.float64) for v in (0.1, -0.3, 0.2, -0.4))
    l = 5
    u = math.log(l + 1)
    th = math.exp(0.2 - 0.4 * u) * 100.0 ** (-2.0 * torch.arange(5, dtype=torch.float64) / 10)
    zc = torch.complex(gam[0::2], gam[1::2]) * torch.exp(1j * th) * math.exp(0.1 - 0.3 * u)
    ref = torch.stack([zc.real, zc.imag], dim=-1).reshape(10)
    assert torch.allclose(depth_gain(gam, a, b, ar, br, l, 100.0), ref, atol=1e-12), "gain"
    # Causal attention: output at position 0 is v at position 0 (softmax over one key).
    qq, kk, vv = (torch.randn(1, 4, 2, 3, generator=g, dtype=torch.float64) for _ in range(3))
    o = attention_core(qq, kk, vv, 0.5)
    assert torch.allclose(o[:, 0], vv[:, 0], atol=1e-12), "causal"
    # Last position attends everywhere: compare with an explicit loop.
    s = torch.einsum("hd,thd->ht", qq[0, 3], kk[0]) * 0.5
    ref = torch.einsum("ht,thd->hd", torch.softmax(s, dim=-1), vv[0])
    assert torch.allclose(o[0, 3], ref, atol=1e-12), "attention"
    # Cross-entropy against torch's own.
    lg = torch.randn(6, 9, generator=g, dtype=torch.float64)
    lab = torch.tensor([1, -100, 8, 0, -100, 4])
    ref = torch.nn.functional.cross_entropy(lg, lab, ignore_index=-100)
    assert abs(cross_entropy(lg, lab) - ref) < 1e-12, "cross_entropy"


def main():
    _self_checks()
    print("self-checks passed")
    for norm in PLACEMENTS:
        print("60m %-15s %12s parameters" % (norm, "{:,}".format(param_count(preset("60m", norm)))))
    # Figures stated in docs/models.md.
    pre = param_count(preset("60m", "pre"))
    assert pre == 58_073_600, pre
    for name in PRESETS:
        for base, lr in (("pre", "layerrope"), ("peri", "layerrope_peri")):
            c = preset(name, base)
            d, L = c.d_model, c.n_layers
            fewer = (2 if base == "pre" else 4) * L * d - 4 * d - 16
            assert param_count(c) - param_count(preset(name, lr)) == fewer, (name, base)
    assert param_count(preset("60m", "pre")) - param_count(preset("60m", "layerrope")) == 6128
    assert param_count(preset("1b", "pre")) - param_count(preset("1b", "layerrope")) == 90096
    print("parameter counts match docs/models.md")


if __name__ == "__main__":
    main()
