-- Differential attention (DIFF Transformer, Ye et al. 2024, arXiv 2410.05258),
-- as tests/reference/diff_attn_ref.py writes it: a causal LM whose attention
-- subtracts two softmax maps. Each of the H differential heads has two query
-- and key heads of width head_dim and one value head of twice that width:
--   head_i = (1 - lambda_init) * RMSNorm((A1 - lambda A2) V_i) * subln.weight
-- Primitives: one lrc.attention over the 2H query/key heads, each value head
-- repeated for its pair by lrc.expand (Dv = 2 head_dim against Dqk =
-- head_dim), the pair split with lrc.slice; lambda from its four vectors
-- through lrc.sum and lrc.exp; rotate-half lrc.rope; RMSNorm as lrc.rmsnorm
-- times a gain; SwiGLU MLP (nn.swiglu); untied lm_head.
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = {}

M.description = "differential attention (DIFF Transformer): two softmax maps per head, subtracted"

-- The speed comparison's size (diff_attn_ref.bench_config, byte vocabulary):
-- 4 heads, each a pair of query/key heads of 32 and a value head of 64.
M.defaults = {
  d_model = 256, n_layers = 2, n_heads = 4, head_dim = 32, d_ff = 688, vocab = 256,
  eps = 1e-5, rope_base = 10000.0,
}

local function validate(cfg)
  for _, k in ipairs({ "d_model", "n_layers", "n_heads", "head_dim", "d_ff", "vocab" }) do
    nn.positive_int(cfg[k], k)
  end
  if cfg.head_dim % 2 ~= 0 then
    error(string.format("RoPE rotates pairs, so head_dim must be even, got %d", cfg.head_dim))
  end
  for _, k in ipairs({ "eps", "rope_base" }) do
    if not (cfg[k] > 0) then error(string.format("%s must be positive, got %s", k, tostring(cfg[k]))) end
  end
end

-- The paper's depth-dependent start of lambda, for the 0-based layer l.
local function lambda_init(l)
  return 0.8 - 0.6 * math.exp(-0.3 * l)
end

-- DiffAttn of x [B, T, d] for layer l (parameters PREFIX.*).
local function diff_attention(prefix, x, l, cfg)
  local B, T = x.shape[1], x.shape[2]
  local H, hd, d = cfg.n_heads, cfg.head_dim, cfg.d_model
  local function lin(name) return nn.linear(prefix .. "." .. name, d, 2 * H * hd, { group = "attention" }) end
  local rope = { base = cfg.rope_base }
  -- 2H query and key heads: heads 2i and 2i+1 are the pair of head i
  local q = lrc.rope(lrc.reshape(lin("q_proj")(x), { B, T, 2 * H, hd }), rope)
  local k = lrc.rope(lrc.reshape(lin("k_proj")(x), { B, T, 2 * H, hd }), rope)
  local v = lrc.reshape(lin("v_proj")(x), { B, T, H, 1, 2 * hd })
  v = lrc.reshape(lrc.expand(v, { B, T, H, 2, 2 * hd }), { B, T, 2 * H, 2 * hd })
  -- A_j V_i for j = 1, 2 of each head i, [B, T, H, 2, 2hd]
  local y = lrc.reshape(lrc.attention(q, k, v, { causal = true, scale = 1 / math.sqrt(hd) }),
    { B, T, H, 2, 2 * hd })
  local function map(j)
    return lrc.reshape(lrc.slice(y, { axis = 3, start = j, size = 1 }), { B, T, H, 2 * hd })
  end
  local function vec(name)
    return lrc.param(prefix .. ".lambda_" .. name, { hd }, { "normal", std = 0.1 }, "attention")
  end
  local li = lambda_init(l)
  local lambda = lrc.exp(lrc.sum(vec("q1") * vec("k1"))) - lrc.exp(lrc.sum(vec("q2") * vec("k2"))) + li
  local o = nn.rmsnorm(prefix .. ".subln", 2 * hd, cfg.eps)(map(0) - map(1) * lambda) * (1 - li)
  return nn.linear(prefix .. ".o_proj", 2 * H * hd, d, { group = "attention" })(lrc.reshape(o, { B, T, 2 * H * hd }))
end

function M.build(cfg, tokens)
  validate(cfg)
  local d = cfg.d_model
  local h = nn.embedding("model.embed_tokens", cfg.vocab, d)(tokens)
  for l = 0, cfg.n_layers - 1 do
    local p = "model.layers." .. l
    h = h + diff_attention(p .. ".self_attn", nn.rmsnorm(p .. ".input_layernorm", d, cfg.eps)(h), l, cfg)
    h = h + nn.swiglu(p .. ".mlp", d, cfg.d_ff)(nn.rmsnorm(p .. ".post_attention_layernorm", d, cfg.eps)(h))
  end
  h = nn.rmsnorm("model.norm", d, cfg.eps)(h)
  return nn.linear("lm_head", d, cfg.vocab)(h)
end

return M
