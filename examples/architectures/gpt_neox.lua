-- GPT-NeoX (Pythia), with Hugging Face's GPTNeoXForCausalLM names: one
-- query_key_value projection laid out per head as [q | k | v], rotary
-- embedding on the first rotary_pct of each head's features only (lrc.slice
-- cuts the head, lrc.rope turns the first part, lrc.concat joins them back),
-- the parallel residual x + attn(LN1 x) + mlp(LN2 x), the erf GELU and an
-- untied embed_out head.
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = {}

M.description = "GPT-NeoX decoder: partial rotary by slice and concat, parallel residual"

M.defaults = {
  d_model = 256, n_layers = 2, n_heads = 4, d_ff = 1024, vocab = 256, rotary_pct = 0.25,
  rope_base = 10000.0, eps = 1e-5,
}

local function layernorm(name, d, eps)
  local w = lrc.param(name .. ".weight", { d }, "ones", "norm")
  local b = lrc.param(name .. ".bias", { d }, "zeros", "norm")
  return function(x) return lrc.layernorm(x, { eps = eps }) * w + b end
end

-- rotate-half RoPE on the first r of a head's Dh features, the rest as they are
local function partial_rope(x, r, Dh, base)
  if r == 0 then return x end
  local rot = lrc.rope(lrc.slice(x, { axis = 3, start = 0, size = r }), { base = base })
  if r == Dh then return rot end
  return lrc.concat({ rot, lrc.slice(x, { axis = 3, start = r, size = Dh - r }) }, { axis = -1 })
end

local function attention(p, cfg, x)
  local B, T, d, H = x.shape[1], x.shape[2], cfg.d_model, cfg.n_heads
  local Dh = d // H
  local r = math.floor(Dh * cfg.rotary_pct)
  -- HF views the projection as [B, T, H, 3 Dh]: each head's q, k and v side by side
  local qkv = lrc.reshape(nn.linear(p .. ".query_key_value", d, 3 * d, { bias = true })(x), { B, T, H, 3 * Dh })
  local function part(i) return lrc.slice(qkv, { axis = 3, start = i * Dh, size = Dh }) end
  local q = partial_rope(part(0), r, Dh, cfg.rope_base)
  local k = partial_rope(part(1), r, Dh, cfg.rope_base)
  local y = lrc.attention(q, k, part(2), { causal = true, scale = 1 / math.sqrt(Dh) })
  return nn.linear(p .. ".dense", d, d, { bias = true })(lrc.reshape(y, { B, T, d }))
end

local function mlp(p, cfg, x)
  local up = nn.linear(p .. ".dense_h_to_4h", cfg.d_model, cfg.d_ff, { bias = true })
  local down = nn.linear(p .. ".dense_4h_to_h", cfg.d_ff, cfg.d_model, { bias = true })
  return down(lrc.gelu(up(x)))
end

function M.build(cfg, tokens)
  for _, k in ipairs({ "d_model", "n_layers", "n_heads", "d_ff", "vocab" }) do nn.positive_int(cfg[k], k) end
  local d = cfg.d_model
  if d % cfg.n_heads ~= 0 then error(string.format("n_heads (%d) must divide d_model (%d)", cfg.n_heads, d)) end
  if cfg.rotary_pct < 0 or cfg.rotary_pct > 1 then
    error(string.format("rotary_pct must lie in [0, 1], got %g", cfg.rotary_pct))
  end
  if math.floor(d // cfg.n_heads * cfg.rotary_pct) % 2 ~= 0 then
    error("rotary_pct must turn an even number of each head's features")
  end
  local h = nn.embedding("gpt_neox.embed_in", cfg.vocab, d)(tokens)
  for l = 0, cfg.n_layers - 1 do
    local p = "gpt_neox.layers." .. l
    local ln1 = layernorm(p .. ".input_layernorm", d, cfg.eps)
    local ln2 = layernorm(p .. ".post_attention_layernorm", d, cfg.eps)
    -- the parallel residual: both branches read the same stream
    h = h + attention(p .. ".attention", cfg, ln1(h)) + mlp(p .. ".mlp", cfg, ln2(h))
  end
  h = layernorm("gpt_neox.final_layer_norm", d, cfg.eps)(h)
  return nn.linear("embed_out", d, cfg.vocab)(h)
end

return M
