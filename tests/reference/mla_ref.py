#!/usr/bin/python3
"""Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434): a small causal LM
written from the paper, with the parameter names of DeepSeek-V2's Hugging Face
modeling code, in PyTorch eager; the reference of tests/fixtures/arch/mla/ and of the
speed comparison. Dense SwiGLU MLP in every layer (no MoE), no YaRN.

Each layer: x += MLA(RMSNorm(x)); x += SwiGLU(RMSNorm(x)); final RMSNorm; untied
lm_head. MLA with H heads, n = qk_nope_head_dim, r = qk_rope_head_dim, dv = v_head_dim:

  queries, [B, T, H, n + r]: q_proj(x), or with q_lora_rank > 0
      q_b_proj(RMSNorm_qa(q_a_proj(x)))            (q_a_layernorm)
  c, k_pe = split(kv_a_proj_with_mqa(x), [kv_lora_rank, r])
  k_nope, v = split(kv_b_proj(RMSNorm_kva(c)) as [B, T, H, n + dv], [n, dv])
  q_nope, q_pe = split(queries, [n, r])
  RoPE on q_pe (per head) and on k_pe (ONE rope key [B, T, r], shared by every head),
      in DeepSeek's layout: the r dims are first de-interleaved ([a0 b0 a1 b1 ..] ->
      [a0 a1 .. b0 b1 ..]) and then rotated rotate-half; the scores equal RoPE on the
      interleaved pairs (2i, 2i+1) of the stored dims, frequency theta^(-2i/r)
  score = (q_nope . k_nope + q_pe . k_pe) * (n + r)^-0.5, causal softmax
  out = o_proj(concat over heads of softmax @ v)    (v of width dv, not n + r)

Parameter names:
  model.embed_tokens.weight                          [V, d]
  model.layers.L.input_layernorm.weight              [d]
  model.layers.L.self_attn.q_proj.weight             [H*(n+r), d]      (q_lora_rank 0)
  model.layers.L.self_attn.q_a_proj.weight           [q_lora_rank, d]  (q_lora_rank > 0)
  model.layers.L.self_attn.q_a_layernorm.weight      [q_lora_rank]
  model.layers.L.self_attn.q_b_proj.weight           [H*(n+r), q_lora_rank]
  model.layers.L.self_attn.kv_a_proj_with_mqa.weight [kv_lora_rank + r, d]
  model.layers.L.self_attn.kv_a_layernorm.weight     [kv_lora_rank]
  model.layers.L.self_attn.kv_b_proj.weight          [H*(n+dv), kv_lora_rank]
  model.layers.L.self_attn.o_proj.weight             [d, H*dv]
  model.layers.L.post_attention_layernorm.weight     [d]
  model.layers.L.mlp.gate_proj.weight (up_proj)      [F, d]
  model.layers.L.mlp.down_proj.weight                [d, F]
  model.norm.weight                                  [d]
  lm_head.weight                                     [V, d]

    /usr/bin/python3 tests/reference/mla_ref.py --check
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
    vocab_size: int = 67
    hidden_size: int = 32
    num_heads: int = 3
    q_lora_rank: int = 12       # 0: q_proj, no query compression
    kv_lora_rank: int = 10
    qk_nope_head_dim: int = 6
    qk_rope_head_dim: int = 4
    v_head_dim: int = 5
    intermediate_size: int = 40
    num_layers: int = 2
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0


def bench_config():
    """The speed comparison's size: d 256, 4 heads of 48+16 (values 32), kv rank 64."""
    return Config(vocab_size=512, hidden_size=256, num_heads=4, q_lora_rank=96, kv_lora_rank=64,
                  qk_nope_head_dim=48, qk_rope_head_dim=16, v_head_dim=32, intermediate_size=688,
                  num_layers=2)


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_deinterleaved(x, theta):
    """x [B, heads, T, r]: DeepSeek's RoPE, de-interleave then rotate-half, positions 0..T-1."""
    B, Hh, T, r = x.shape
    x = x.view(B, Hh, T, r // 2, 2).transpose(3, 4).reshape(B, Hh, T, r)
    inv = 1.0 / theta ** (torch.arange(0, r, 2, dtype=torch.float64) / r)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], dim=-1).to(x.dtype)
    x1, x2 = x[..., :r // 2], x[..., r // 2:]
    return x * ang.cos() + torch.cat([-x2, x1], dim=-1) * ang.sin()


class MLA(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, H = cfg.hidden_size, cfg.num_heads
        self.cfg = cfg
        qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        if cfg.q_lora_rank:
            self.q_a_proj = nn.Linear(d, cfg.q_lora_rank, bias=False)
            self.q_a_layernorm = RMSNorm(cfg.q_lora_rank, cfg.rms_norm_eps)
            self.q_b_proj = nn.Linear(cfg.q_lora_rank, H * qk, bias=False)
        else:
            self.q_proj = nn.Linear(d, H * qk, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(d, cfg.kv_lora_rank + cfg.qk_rope_head_dim, bias=False)
        self.kv_a_layernorm = RMSNorm(cfg.kv_lora_rank, cfg.rms_norm_eps)
        self.kv_b_proj = nn.Linear(cfg.kv_lora_rank, H * (cfg.qk_nope_head_dim + cfg.v_head_dim), bias=False)
        self.o_proj = nn.Linear(H * cfg.v_head_dim, d, bias=False)
        self.softmax_scale = qk ** -0.5

    def project(self, x):
        """q_nope [B,H,T,n], q_pe [B,H,T,r] (roped), k_nope [B,H,T,n], k_pe [B,1,T,r] (roped),
        v [B,H,T,dv], and the normed latent c [B,T,kv_lora_rank]."""
        cfg = self.cfg
        B, T, _ = x.shape
        H, n, r, dv = cfg.num_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
        q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x))) if cfg.q_lora_rank else self.q_proj(x)
        q_nope, q_pe = torch.split(q.view(B, T, H, n + r).transpose(1, 2), [n, r], dim=-1)
        c, k_pe = torch.split(self.kv_a_proj_with_mqa(x), [cfg.kv_lora_rank, r], dim=-1)
        c = self.kv_a_layernorm(c)
        k_nope, v = torch.split(self.kv_b_proj(c).view(B, T, H, n + dv).transpose(1, 2), [n, dv], dim=-1)
        q_pe = rope_deinterleaved(q_pe, cfg.rope_theta)
        k_pe = rope_deinterleaved(k_pe.view(B, 1, T, r), cfg.rope_theta)
        return q_nope, q_pe, k_nope, k_pe, v, c

    def forward(self, x):
        B, T, _ = x.shape
        q_nope, q_pe, k_nope, k_pe, v, _ = self.project(x)
        s = (torch.matmul(q_nope, k_nope.transpose(2, 3)) + torch.matmul(q_pe, k_pe.transpose(2, 3)))
        s = s * self.softmax_scale
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        a = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
        return self.o_proj(torch.matmul(a, v).transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = MLA(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class MLAModel(nn.Module):
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
    """Seeded values: matrices N(0, 1/fan_in), embeddings N(0, 1), norm gains
    1 + N(0, 0.2^2), so that every parameter matters."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
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
    assert keys.pop("architecture") == "mla", d
    model = MLAModel(Config(**keys))
    tensors, _ = st.load(os.path.join(d, "weights.safetensors"))
    model.load_state_dict(tensors, strict=True)
    return model


def config_json(cfg):
    return json.dumps(dict(asdict(cfg), architecture="mla"), indent=2, sort_keys=True) + "\n"


def _absorbed_attention(at, x):
    """MLA in the paper's inference form: W_UK absorbed into the query and W_UV into the
    output, the scores taken against the cached latent c and the shared rope key; the
    RoPE taken on the interleaved pairs directly. Independent of forward()'s layout."""
    cfg = at.cfg
    B, T, _ = x.shape
    H, n, r, dv, R = cfg.num_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim, cfg.kv_lora_rank
    q = at.q_b_proj(at.q_a_layernorm(at.q_a_proj(x))) if cfg.q_lora_rank else at.q_proj(x)
    q = q.view(B, T, H, n + r)
    c_raw, kpe = torch.split(at.kv_a_proj_with_mqa(x), [R, r], dim=-1)
    c = at.kv_a_layernorm(c_raw)
    W = at.kv_b_proj.weight.view(H, n + dv, R)
    W_uk, W_uv = W[:, :n], W[:, n:]
    q_lat = torch.einsum("bthn,hnr->bthr", q[..., :n], W_uk)
    inv = 1.0 / cfg.rope_theta ** (torch.arange(0, r, 2, dtype=torch.float64) / r)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]

    def rot_pairs(z):  # [.., T, .., r] pairs (2i, 2i+1)
        a, b = z[..., 0::2], z[..., 1::2]
        cs = ang.cos().view(T, *([1] * (z.dim() - 3)), r // 2)
        sn = ang.sin().view(T, *([1] * (z.dim() - 3)), r // 2)
        return torch.stack([a * cs - b * sn, a * sn + b * cs], -1).flatten(-2)

    qpe, kpe = rot_pairs(q[..., n:]), rot_pairs(kpe.view(B, T, 1, r))[:, :, 0]
    s = torch.einsum("bthr,bsr->bhts", q_lat, c) + torch.einsum("bthr,bsr->bhts", qpe, kpe)
    s = s * (n + r) ** -0.5
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    o_lat = torch.einsum("bhts,bsr->bthr", torch.softmax(s, -1), c)
    o = torch.einsum("bthr,hvr->bthv", o_lat, W_uv)
    return at.o_proj(o.reshape(B, T, H * dv))


def check():
    torch.manual_seed(0)
    worst = 0.0
    for q_rank in (12, 0):
        gen = torch.Generator().manual_seed(7)
        cfg = Config(q_lora_rank=q_rank)
        m = MLAModel(cfg).double()
        init_params(m, gen)
        tokens = torch.randint(0, cfg.vocab_size, (2, 8), generator=gen)
        with torch.no_grad():
            y = m(tokens)
            x = m.model.layers[0].input_layernorm(m.model.embed_tokens(tokens))
            at = m.model.layers[0].self_attn
            err = (at(x) - _absorbed_attention(at, x)).abs().max().item()
            assert err < 1e-12, "q_lora_rank %d: absorbed form differs by %g" % (q_rank, err)
            worst = max(worst, err)
            t2 = tokens.clone()
            t2[:, 4:] = (t2[:, 4:] + 1) % cfg.vocab_size
            causal = (m(t2)[:, :4] - y[:, :4]).abs().max().item()
            assert causal == 0.0, "a later token changed an earlier logit by %g" % causal
    print("mla_ref: absorbed (latent-cache) form within %.1e, with and without q_lora_rank; causal" % worst)


if __name__ == "__main__":
    if "--check" in sys.argv:
        check()
    else:
        print(__doc__)
