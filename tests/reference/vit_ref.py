#!/usr/bin/python3
"""An independent PyTorch ViT (docs/models.md) with Hugging Face parameter names, in f64:
the reference lrc's models/vit.lua is tested against. The patch embedding is a strided
convolution (lrc reshapes and multiplies), the class token a concatenation (lrc pads and
adds), LayerNorm and GELU are torch's own.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

import llama_ref


@dataclass
class Config:
    image_size: int = 28
    channels: int = 1
    patch: int = 4
    n_classes: int = 10
    d_model: int = 64
    n_layers: int = 6
    n_heads: int = 2
    d_ff: int = 256
    norm: str = "pre"
    eps: float = 1e-6
    layerrope_alpha: float = 0.0
    layerrope_beta: float = 0.0
    layerrope_alpha_rot: float = 0.0
    layerrope_beta_rot: float = -0.5
    layerrope_base: float = 100.0


CONFIG_KEYS = tuple(Config.__dataclass_fields__)
SITES = ("in_attn", "in_mlp", "out_attn", "out_mlp")


def param_shapes(cfg):
    d, C, P = cfg.d_model, cfg.channels, cfg.patch
    T = (cfg.image_size // P) ** 2 + 1
    s = {
        "vit.embeddings.patch_embeddings.projection.weight": [d, C, P, P],
        "vit.embeddings.patch_embeddings.projection.bias": [d],
        "vit.embeddings.cls_token": [1, 1, d],
        "vit.embeddings.position_embeddings": [1, T, d],
    }
    if cfg.norm == "layerrope":
        for site in SITES:
            s["vit.layerrope.%s_gamma" % site] = [d]
            for k in ("alpha", "beta", "alpha_rot", "beta_rot"):
                s["vit.layerrope.%s_%s" % (site, k)] = []
    for l in range(cfg.n_layers):
        pre = "vit.encoder.layer.%d." % l
        for ln in ("layernorm_before", "layernorm_after"):
            if cfg.norm == "pre":
                s[pre + ln + ".weight"] = [d]
            s[pre + ln + ".bias"] = [d]
        for name in ("query", "key", "value"):
            s[pre + "attention.attention.%s.weight" % name] = [d, d]
            s[pre + "attention.attention.%s.bias" % name] = [d]
        s[pre + "attention.output.dense.weight"] = [d, d]
        s[pre + "attention.output.dense.bias"] = [d]
        s[pre + "intermediate.dense.weight"] = [cfg.d_ff, d]
        s[pre + "intermediate.dense.bias"] = [cfg.d_ff]
        s[pre + "output.dense.weight"] = [d, cfg.d_ff]
        s[pre + "output.dense.bias"] = [d]
    s["vit.layernorm.weight"] = [d]
    s["vit.layernorm.bias"] = [d]
    s["classifier.weight"] = [cfg.n_classes, d]
    s["classifier.bias"] = [cfg.n_classes]
    return s


def gain(p, site, layer, cfg):
    pre = "vit.layerrope.%s_" % site
    return llama_ref.depth_gain(p[pre + "gamma"], p[pre + "alpha"], p[pre + "beta"], p[pre + "alpha_rot"],
                                p[pre + "beta_rot"], layer, cfg.layerrope_base)


def forward(params, images, cfg, streams=None):
    """Class logits [B, n_classes] in f64; streams (a dict), when given, gets the residual stream
    [B, T, d] after each layer by its index (lrc diagnose's check)."""
    p = {k: v.to(torch.float64) for k, v in params.items()}
    x = images.to(torch.float64)
    B, d, H = x.shape[0], cfg.d_model, cfg.n_heads
    dh = d // H
    e = F.conv2d(x, p["vit.embeddings.patch_embeddings.projection.weight"],
                 p["vit.embeddings.patch_embeddings.projection.bias"], stride=cfg.patch)
    e = e.flatten(2).transpose(1, 2)  # [B, N, d], patches in row-major order
    h = torch.cat([p["vit.embeddings.cls_token"].expand(B, -1, -1), e], 1) + p["vit.embeddings.position_embeddings"]
    T = h.shape[1]
    rope = cfg.norm == "layerrope"
    for l in range(cfg.n_layers):
        pre = "vit.encoder.layer.%d." % l

        def norm(t, name, site):
            w = gain(p, site, l, cfg) if rope else p[pre + name + ".weight"]
            return F.layer_norm(t, (d,), w, p[pre + name + ".bias"], cfg.eps)

        def dense(t, name):
            return F.linear(t, p[pre + name + ".weight"], p[pre + name + ".bias"])

        def heads(t):
            return t.view(B, T, H, dh).transpose(1, 2)

        a = norm(h, "layernorm_before", "in_attn")
        q, k, v = (heads(dense(a, "attention.attention." + n)) for n in ("query", "key", "value"))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh), -1) @ v
        o = dense(att.transpose(1, 2).reshape(B, T, d), "attention.output.dense")
        h = h + (o * gain(p, "out_attn", l, cfg) if rope else o)
        m = dense(F.gelu(dense(norm(h, "layernorm_after", "in_mlp"), "intermediate.dense")), "output.dense")
        h = h + (m * gain(p, "out_mlp", l, cfg) if rope else m)
        if streams is not None:
            streams[l] = h
    c = F.layer_norm(h[:, 0], (d,), p["vit.layernorm.weight"], p["vit.layernorm.bias"], cfg.eps)
    return F.linear(c, p["classifier.weight"], p["classifier.bias"])


def loss(logits, labels):
    return F.cross_entropy(logits, labels.to(torch.int64), ignore_index=-100)
