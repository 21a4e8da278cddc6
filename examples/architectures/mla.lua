-- Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434), as
-- tests/reference/mla_ref.py writes it: a causal LM whose keys and values come
-- from one low-rank latent per position, plus one rotary key shared by every
-- head. Per head, the query and key are [nope | rope] (qk_nope_dim +
-- qk_rope_dim wide) and the value v_head_dim wide.
-- Primitives: low-rank projections and RMSNorm (lrc.rmsnorm times a gain),
-- lrc.slice to split [latent | k_pe] and [k_nope | v], DeepSeek's interleaved
-- RoPE as lrc.reshape/lrc.transpose (de-interleave) then rotate-half lrc.rope,
-- the shared rotary key broadcast to the heads by lrc.expand, [nope | rope]
-- joined by lrc.concat, and lrc.attention with Dv != Dqk; SwiGLU MLP
-- (nn.swiglu); untied lm_head.
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = {}

M.description = "multi-head latent attention (DeepSeek-V2): low-rank q and kv, a rotary key shared by the heads"

-- The speed comparison's size (mla_ref.bench_config, byte vocabulary): 4
-- heads of 48 + 16 (values 32), q rank 96, kv rank 64.
M.defaults = {
  d_model = 256, n_layers = 2, n_heads = 4, d_ff = 688, vocab = 256,
  q_lora_rank = 96,  -- 0: one q_proj, no query compression
  kv_lora_rank = 64, qk_nope_dim = 48, qk_rope_dim = 16, v_head_dim = 32,
  eps = 1e-6, rope_base = 10000.0,
}

local function validate(cfg)
  for _, k in ipairs({ "d_model", "n_layers", "n_heads", "d_ff", "vocab", "kv_lora_rank", "qk_nope_dim",
    "qk_rope_dim", "v_head_dim" }) do
    nn.positive_int(cfg[k], k)
  end
  if math.type(cfg.q_lora_rank) ~= "integer" or cfg.q_lora_rank < 0 then
    error(string.format("q_lora_rank must be a non-negative integer (0: no query compression), got %s",
      tostring(cfg.q_lora_rank)))
  end
  if cfg.qk_rope_dim % 2 ~= 0 then
    error(string.format("RoPE rotates pairs, so qk_rope_dim must be even, got %d", cfg.qk_rope_dim))
  end
  for _, k in ipairs({ "eps", "rope_base" }) do
    if not (cfg[k] > 0) then error(string.format("%s must be positive, got %s", k, tostring(cfg[k]))) end
  end
end

local function lin(name, d_in, d_out) return nn.linear(name, d_in, d_out, { group = "attention" }) end

local function part(x, start, size) return lrc.slice(x, { axis = x.ndim - 1, start = start, size = size }) end

-- DeepSeek's RoPE on x [B, T, heads, r]: the interleaved pairs (2i, 2i+1)
-- de-interleaved to [x0 x2 .. | x1 x3 ..], then rotated rotate-half.
local function rope_interleaved(x, base)
  local B, T, Hh, r = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
  local y = lrc.transpose(lrc.reshape(x, { B, T, Hh, r // 2, 2 }), { 0, 1, 2, 4, 3 })
  return lrc.rope(lrc.reshape(y, { B, T, Hh, r }), { base = base })
end

-- MLA of x [B, T, d] (parameters PREFIX.*).
local function mla(prefix, x, cfg)
  local B, T = x.shape[1], x.shape[2]
  local d, H, n, r, dv, R = cfg.d_model, cfg.n_heads, cfg.qk_nope_dim, cfg.qk_rope_dim, cfg.v_head_dim,
      cfg.kv_lora_rank
  local q
  if cfg.q_lora_rank > 0 then
    local qa = lin(prefix .. ".q_a_proj", d, cfg.q_lora_rank)(x)
    q = lin(prefix .. ".q_b_proj", cfg.q_lora_rank, H * (n + r))(
      nn.rmsnorm(prefix .. ".q_a_layernorm", cfg.q_lora_rank, cfg.eps)(qa))
  else
    q = lin(prefix .. ".q_proj", d, H * (n + r))(x)
  end
  q = lrc.reshape(q, { B, T, H, n + r })
  local kva = lin(prefix .. ".kv_a_proj_with_mqa", d, R + r)(x)
  local c = nn.rmsnorm(prefix .. ".kv_a_layernorm", R, cfg.eps)(part(kva, 0, R))
  local kv = lrc.reshape(lin(prefix .. ".kv_b_proj", R, H * (n + dv))(c), { B, T, H, n + dv })
  -- one rotary key per position, the same for every head
  local k_pe = rope_interleaved(lrc.reshape(part(kva, R, r), { B, T, 1, r }), cfg.rope_base)
  local k = lrc.concat({ part(kv, 0, n), lrc.expand(k_pe, { B, T, H, r }) }, { axis = -1 })
  q = lrc.concat({ part(q, 0, n), rope_interleaved(part(q, n, r), cfg.rope_base) }, { axis = -1 })
  local y = lrc.attention(q, k, part(kv, n, dv), { causal = true, scale = (n + r) ^ -0.5 })
  return lin(prefix .. ".o_proj", H * dv, d)(lrc.reshape(y, { B, T, H * dv }))
end

function M.build(cfg, tokens)
  validate(cfg)
  local d = cfg.d_model
  local h = nn.embedding("model.embed_tokens", cfg.vocab, d)(tokens)
  for l = 0, cfg.n_layers - 1 do
    local p = "model.layers." .. l
    h = h + mla(p .. ".self_attn", nn.rmsnorm(p .. ".input_layernorm", d, cfg.eps)(h), cfg)
    h = h + nn.swiglu(p .. ".mlp", d, cfg.d_ff)(nn.rmsnorm(p .. ".post_attention_layernorm", d, cfg.eps)(h))
  end
  h = nn.rmsnorm("model.norm", d, cfg.eps)(h)
  return nn.linear("lm_head", d, cfg.vocab)(h)
end

return M
