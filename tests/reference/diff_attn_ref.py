#!/usr/bin/python3
"""Differential attention (DIFF Transformer, Ye et al. 2024, arXiv 2410.05258): a small
causal LM written from the paper, in PyTorch eager, the reference of
tests/fixtures/arch/diff_attn/ and of the speed comparison.

Each layer: x += DiffAttn(RMSNorm(x)); x += SwiGLU(RMSNorm(x)); then a final RMSNorm and
an untied lm_head. DiffAttn with H heads of width hd (the half-width d of the paper):

  q = q_proj(x) as 2H heads of hd, k = k_proj(x) as 2H heads of hd, v = v_proj(x) as H
  heads of 2*hd; RoPE (rotate-half, as LLaMA's Hugging Face code) on every q and k head;
  for head i, heads 2i and 2i+1 are the pair (Q1, K1) and (Q2, K2):
    A_j = softmax(Q_j K_j^T / sqrt(hd) + causal mask),      j = 1, 2
    lambda = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) + lambda_init
    lambda_init = 0.8 - 0.6 * exp(-0.3 * l)   (l = 0-based layer index, the paper's l-1)
    head_i = (1 - lambda_init) * RMSNorm_2hd((A_1 - lambda * A_2) V_i) * subln.weight
  out = o_proj(concat of the H heads).
The four lambda vectors [hd] and subln.weight [2*hd] are per layer, shared by its heads.

Parameter names (Hugging Face LLaMA style):
  model.embed_tokens.weight                      [V, d]
  model.layers.L.input_layernorm.weight          [d]
  model.layers.L.self_attn.q_proj.weight         [2*H*hd, d]   (k_proj, v_proj alike)
  model.layers.L.self_attn.o_proj.weight         [d, 2*H*hd]
  model.layers.L.self_attn.lambda_q1 (k1, q2, k2) [hd]
  model.layers.L.self_attn.subln.weight          [2*hd]
  model.layers.L.post_attention_layernorm.weight [d]
  model.layers.L.mlp.gate_proj.weight            [F, d]        (up_proj alike)
  model.layers.L.mlp.down_proj.weight            [d, F]
  model.norm.weight                              [d]
  lm_head.weight                                 [V, d]

    /usr/bin/python3 tests/reference/diff_attn_ref.py --check
"""

import json
import math
import os
import sys
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

import safetensors_io as st


@dataclass
class Config:
    vocab_size: int = 61
    hidden_size: int = 32
    num_heads: int = 2          # differential heads; 2*num_heads softmax maps
    head_dim: int = 8           # hd: width of each of Q1, Q2, K1, K2; V heads are 2*hd
    intermediate_size: int = 40
    num_layers: int = 2
    rms_norm_eps: float = 1e-5  # every RMSNorm, subln included
    rope_theta: float = 10000.0


def bench_config():
    """The speed comparison's size: d 256, 4 heads of 2*32, SwiGLU 688, 2 layers."""
    return Config(vocab_size=512, hidden_size=256, num_heads=4, head_dim=32,
                  intermediate_size=688, num_layers=2)


def lambda_init(layer):
    return 0.8 - 0.6 * math.exp(-0.3 * layer)


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, theta):
    """x [B, T, heads, D]: rotate-half RoPE at positions 0..T-1."""
    T, D = x.shape[1], x.shape[3]
    inv = 1.0 / theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], dim=-1).to(x.dtype)[None, :, None, :]
    x1, x2 = x[..., :D // 2], x[..., D // 2:]
    return x * ang.cos() + torch.cat([-x2, x1], dim=-1) * ang.sin()


class DiffAttention(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        H, hd, d = cfg.num_heads, cfg.head_dim, cfg.hidden_size
        self.H, self.hd, self.theta = H, hd, cfg.rope_theta
        self.lambda_init = lambda_init(layer)
        self.q_proj = nn.Linear(d, 2 * H * hd, bias=False)
        self.k_proj = nn.Linear(d, 2 * H * hd, bias=False)
        self.v_proj = nn.Linear(d, 2 * H * hd, bias=False)
        self.o_proj = nn.Linear(2 * H * hd, d, bias=False)
        for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            setattr(self, name, nn.Parameter(torch.zeros(hd)))
        self.subln = RMSNorm(2 * hd, cfg.rms_norm_eps)

    def lam(self):
        return (torch.exp(torch.sum(self.lambda_q1 * self.lambda_k1))
                - torch.exp(torch.sum(self.lambda_q2 * self.lambda_k2)) + self.lambda_init)

    def forward(self, x):
        B, T, _ = x.shape
        H, hd = self.H, self.hd
        q = rope(self.q_proj(x).view(B, T, 2 * H, hd), self.theta).transpose(1, 2)
        k = rope(self.k_proj(x).view(B, T, 2 * H, hd), self.theta).transpose(1, 2)
        v = self.v_proj(x).view(B, T, H, 2 * hd).transpose(1, 2)
        s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(hd)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        a = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1).view(B, H, 2, T, T)
        a = a[:, :, 0] - self.lam() * a[:, :, 1]
        o = self.subln(torch.matmul(a, v)) * (1.0 - self.lambda_init)
        return self.o_proj(o.transpose(1, 2).reshape(B, T, 2 * H * hd))


class MLP(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, cfg, layer):
        super().__init__()
        d = cfg.hidden_size
        self.input_layernorm = RMSNorm(d, cfg.rms_norm_eps)
        self.self_attn = DiffAttention(cfg, layer)
        self.post_attention_layernorm = RMSNorm(d, cfg.rms_norm_eps)
        self.mlp = MLP(d, cfg.intermediate_size)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Layer(cfg, l) for l in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class DiffTransformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = Body(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def forward(self, tokens):
        x = self.model.embed_tokens(tokens)
        for layer in self.model.layers:
            x = layer(x)
        return self.lm_head(self.model.norm(x))


def init_params(model, gen):
    """Seeded values with every parameter away from its neutral value: matrices
    N(0, 1/fan_in), embeddings N(0, 1), norm gains 1 + N(0, 0.2^2), lambda vectors
    N(0, 0.3^2) (the paper's 0.1 makes lambda ~ lambda_init; 0.3 lets them matter)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith("layernorm.weight") or "subln" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            elif ".lambda_" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
            elif name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64))
            else:
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) / math.sqrt(p.shape[1]))


def next_token_loss(logits, tokens):
    V = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), tokens[:, 1:].reshape(-1).long())


def from_dir(d):
    """The model of a fixture folder: config.json and weights.safetensors, f32."""
    with open(os.path.join(d, "config.json")) as f:
        keys = json.load(f)
    assert keys.pop("architecture") == "diff_transformer", d
    model = DiffTransformer(Config(**keys))
    tensors, _ = st.load(os.path.join(d, "weights.safetensors"))
    model.load_state_dict(tensors, strict=True)
    return model


def config_json(cfg):
    return json.dumps(dict(asdict(cfg), architecture="diff_transformer"), indent=2, sort_keys=True) + "\n"


def _naive_head_forward(model, tokens):
    """The paper's equations head by head with explicit loops over heads, from the
    same parameters: an independent form of DiffAttn for --check."""
    cfg = model.cfg
    H, hd = cfg.num_heads, cfg.head_dim
    x = model.model.embed_tokens(tokens)
    B, T, _ = x.shape
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l, layer in enumerate(model.model.layers):
        at = layer.self_attn
        h = layer.input_layernorm(x)
        lam = (math.exp(float((at.lambda_q1 * at.lambda_k1).sum()))
               - math.exp(float((at.lambda_q2 * at.lambda_k2).sum())) + lambda_init(l))
        heads = []
        for i in range(H):
            Wq, Wk = at.q_proj.weight[2 * i * hd:(2 * i + 2) * hd], at.k_proj.weight[2 * i * hd:(2 * i + 2) * hd]
            Wv = at.v_proj.weight[2 * i * hd:(2 * i + 2) * hd]
            Q = rope((h @ Wq.t()).view(B, T, 2, hd), cfg.rope_theta)
            K = rope((h @ Wk.t()).view(B, T, 2, hd), cfg.rope_theta)
            A = []
            for j in range(2):
                s = Q[:, :, j] @ K[:, :, j].transpose(1, 2) / math.sqrt(hd)
                A.append(torch.softmax(torch.where(causal, s, torch.tensor(-1e300, dtype=s.dtype)), -1))
            o = (A[0] - lam * A[1]) @ (h @ Wv.t())
            o = o / torch.sqrt((o * o).mean(-1, keepdim=True) + cfg.rms_norm_eps) * at.subln.weight
            heads.append((1 - lambda_init(l)) * o)
        x = x + torch.cat(heads, -1) @ at.o_proj.weight.t()
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    return model.lm_head(model.model.norm(x))


def check():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(5)
    cfg = Config()
    m = DiffTransformer(cfg).double()
    init_params(m, gen)
    tokens = torch.randint(0, cfg.vocab_size, (2, 9), generator=gen)
    with torch.no_grad():
        y = m(tokens)
        err = (y - _naive_head_forward(m, tokens)).abs().max().item()
        assert err < 1e-12, "batched and per-head forms differ by %g" % err
        t2 = tokens.clone()
        t2[:, 5:] = (t2[:, 5:] + 1) % cfg.vocab_size
        causal = (m(t2)[:, :5] - y[:, :5]).abs().max().item()
        assert causal == 0.0, "a later token changed an earlier logit by %g" % causal
        lam = [float(l.self_attn.lam()) for l in m.model.layers]
        assert all(abs(v - lambda_init(i)) > 1e-3 for i, v in enumerate(lam)), lam
    print("diff_attn_ref: per-head form within %.1e, causal, lambda %s" % (err, ["%.4f" % v for v in lam]))


if __name__ == "__main__":
    if "--check" in sys.argv:
        check()
    else:
        print(__doc__)
