#!/usr/bin/python3
"""An independent PyTorch Parcae (docs/models.md) in f64, written from its description: the
reference models/parcae.lua is tested against. The recurrence is a Python loop; the
truncated gradient runs the first T - k iterations under torch.no_grad() and the last
k = min(T, mu_bwd) with autograd, as Parcae's training does.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

import llama_ref


@dataclass
class Config:
    d_model: int = 32
    n_heads: int = 2
    n_prelude: int = 1
    n_recurrent: int = 1
    n_coda: int = 1
    vocab: int = 256
    T: int = 8
    mu_rec: float = 8.0
    mu_bwd: int = 4
    state_init: str = "zero"
    norm: str = "pre"
    eps: float = 1e-6
    rope_base: float = 10000.0
    layerrope_alpha: float = 0.0
    layerrope_beta: float = 0.0
    layerrope_alpha_rot: float = 0.0
    layerrope_beta_rot: float = -0.5
    layerrope_base: float = 100.0


CONFIG_KEYS = tuple(Config.__dataclass_fields__)
SITES = ("in_attn", "in_mlp", "out_attn", "out_mlp")


def stacks(cfg):
    """(prefix, depth index) of every block in order."""
    out, depth = [], 0
    for name, n in (("prelude", cfg.n_prelude), ("recurrent", cfg.n_recurrent), ("coda", cfg.n_coda)):
        for i in range(n):
            out.append(("model.%s.%d." % (name, i), depth))
            depth += 1
    return out


def param_shapes(cfg):
    d = cfg.d_model
    s = {"model.embed_tokens.weight": [cfg.vocab, d]}
    if cfg.norm == "layerrope":
        for site in SITES:
            s["model.layerrope.%s_gamma" % site] = [d]
            for k in ("alpha", "beta", "alpha_rot", "beta_rot"):
                s["model.layerrope.%s_%s" % (site, k)] = []
    for pre, _ in stacks(cfg):
        if cfg.norm == "pre":
            s[pre + "input_layernorm.weight"] = [d]
            s[pre + "post_attention_layernorm.weight"] = [d]
        for n in ("q", "k", "v", "o"):
            s[pre + "self_attn.%s_proj.weight" % n] = [d, d]
        s[pre + "mlp.up_proj.weight"] = [4 * d, d]
        s[pre + "mlp.down_proj.weight"] = [d, 4 * d]
    s["model.prelude_norm.weight"] = [d]
    s["model.injection.A_log"] = [d]
    s["model.injection.dt_bias"] = [d]
    s["model.injection.B.weight"] = [d, d]
    s["model.C.weight"] = [d, d]
    s["model.norm.weight"] = [d]
    return s


def _gain(p, site, layer, cfg):
    pre = "model.layerrope.%s_" % site
    return llama_ref.depth_gain(p[pre + "gamma"], p[pre + "alpha"], p[pre + "beta"], p[pre + "alpha_rot"],
                                p[pre + "beta_rot"], layer, cfg.layerrope_base)


def block(h, p, pre, depth, cfg):
    B, T, d = h.shape
    H = cfg.n_heads
    Dh = d // H
    rope = cfg.norm == "layerrope"

    def rms(x):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + cfg.eps)

    def lin(x, name):
        return x @ p[pre + name + ".weight"].t()

    x = rms(h) * (_gain(p, "in_attn", depth, cfg) if rope else p[pre + "input_layernorm.weight"])
    q = rms(llama_ref.rope(lin(x, "self_attn.q_proj").reshape(B, T, H, Dh), cfg.rope_base))  # QK-norm after RoPE
    k = rms(llama_ref.rope(lin(x, "self_attn.k_proj").reshape(B, T, H, Dh), cfg.rope_base))
    v = lin(x, "self_attn.v_proj").reshape(B, T, H, Dh)
    a = lin(llama_ref.attention_core(q, k, v, 1.0 / math.sqrt(Dh), causal=True).reshape(B, T, d), "self_attn.o_proj")
    h = h + (a * _gain(p, "out_attn", depth, cfg) if rope else a)
    x = rms(h) * (_gain(p, "in_mlp", depth, cfg) if rope else p[pre + "post_attention_layernorm.weight"])
    m = lin(torch.relu(lin(x, "mlp.up_proj")) ** 2, "mlp.down_proj")
    return h + (m * _gain(p, "out_mlp", depth, cfg) if rope else m)


def forward(params, tokens, cfg, T=None, h0=None, k_grad=0):
    """Logits [B, T, V] in f64 after T iterations (cfg.T by default) from h0 (zeros by
    default); with k_grad > 0 the first T - k_grad iterations run without gradients."""
    p = {k: v.to(torch.float64) for k, v in params.items()}
    T = cfg.T if T is None else T
    blocks = stacks(cfg)
    P, R = cfg.n_prelude, cfg.n_recurrent
    rms = lambda x: x / torch.sqrt((x * x).mean(-1, keepdim=True) + cfg.eps)  # noqa: E731
    h = p["model.embed_tokens.weight"][tokens.long()]
    for pre, depth in blocks[:P]:
        h = block(h, p, pre, depth, cfg)
    e = rms(h) * p["model.prelude_norm.weight"]
    delta = F.softplus(p["model.injection.dt_bias"])
    a_bar = torch.exp(-delta * torch.exp(p["model.injection.A_log"]))
    drive = delta * (e @ p["model.injection.B.weight"].t())
    s = torch.zeros_like(e) if h0 is None else h0.to(torch.float64)

    def step(s):
        u = a_bar * s + drive
        for pre, depth in blocks[P:P + R]:
            u = block(u, p, pre, depth, cfg)
        return u

    for t in range(T):
        if k_grad and t < T - k_grad:
            with torch.no_grad():
                s = step(s)
            s = s.detach()
        else:
            s = step(s)
    h = s @ p["model.C.weight"].t()
    for pre, depth in blocks[P + R:]:
        h = block(h, p, pre, depth, cfg)
    h = rms(h) * p["model.norm.weight"]
    return h @ p["model.embed_tokens.weight"].t()
