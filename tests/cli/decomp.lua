-- decomp.lua — each high-level op beside its decomposition into primitives
-- (ctest decomp): `form = "fast"` builds the ops, `form = "prims"` the same
-- functions from sum, mean, amax, exp, erf, where, ... alone. Each op reads
-- its own projection of the embedding (parameter in_NAME; attention's q, k,
-- v), so decomp.sh's comparison of the two forms' gradients holds every op
-- to its decomposition on its own, and of their logits all of them at once.
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = { defaults = { d_model = 16, heads = 2, vocab = 32, form = "fast" }, presets = {} }

local SQRT_2_OVER_PI = math.sqrt(2 / math.pi)

-- the primitive forms, each the definition in docs/ir.md
local prims = {
  rmsnorm = function(x) return x * lrc.rsqrt(lrc.mean(x * x, { axis = -1, keepdim = true }) + 1e-5) end,
  layernorm = function(x)
    local c = x - lrc.mean(x, { axis = -1, keepdim = true })
    return c * lrc.rsqrt(lrc.mean(c * c, { axis = -1, keepdim = true }) + 1e-5)
  end,
  softmax = function(x)
    local e = lrc.exp(x - lrc.amax(x, { axis = -1, keepdim = true }))
    return e / lrc.sum(e, { axis = -1, keepdim = true })
  end,
  silu = function(x) return x / (1 + lrc.exp(-x)) end,
  sigmoid = function(x) return 1 / (1 + lrc.exp(-x)) end,
  gelu = function(x) return 0.5 * x * (1 + lrc.erf(x * (1 / math.sqrt(2)))) end,
  gelu_tanh = function(x) return 0.5 * x * (1 + lrc.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))) end,
  relu = function(x) return lrc.maximum(x, 0) end,
}

local fast = {
  rmsnorm = function(x) return lrc.rmsnorm(x, { eps = 1e-5 }) end,
  layernorm = function(x) return lrc.layernorm(x, { eps = 1e-5 }) end,
  softmax = lrc.softmax, silu = lrc.silu, sigmoid = lrc.sigmoid, gelu = lrc.gelu,
  gelu_tanh = lrc.gelu_tanh, relu = lrc.relu,
}

local ORDER = { "rmsnorm", "layernorm", "softmax", "silu", "sigmoid", "gelu", "gelu_tanh", "relu" }

-- causal attention without a bias, scale 1/sqrt(Dh): per head the scores as
-- a broadcast product summed over Dh, the mask from two position ramps
-- (cumsums of ones), softmax over the keys, then the values summed over them
local function attention_prims(q, k, v)
  local B, T, H, Dh = q.shape[1], q.shape[2], q.shape[3], q.shape[4]
  local s = lrc.sum(lrc.reshape(q, { B, T, 1, H, Dh }) * lrc.reshape(k, { B, 1, T, H, Dh }), { axis = -1 })
  s = s * (1 / math.sqrt(Dh))                                    -- [B, Tq, Tk, H]
  local pos = lrc.cumsum(lrc.full({ T }, 1), { axis = 0 })
  local later = lrc.gt(lrc.reshape(pos, { 1, 1, T, 1 }), lrc.reshape(pos, { 1, T, 1, 1 }))
  s = lrc.where(later, lrc.full({ 1, T, T, 1 }, -1e30), s)
  local e = lrc.exp(s - lrc.amax(s, { axis = 2, keepdim = true }))
  local p = e / lrc.sum(e, { axis = 2, keepdim = true })
  return lrc.sum(lrc.reshape(p, { B, T, T, H, 1 }) * lrc.reshape(v, { B, 1, T, H, Dh }), { axis = 2 })
end

function M.build(cfg, tokens)
  if cfg.form ~= "fast" and cfg.form ~= "prims" then error("form must be fast or prims, got " .. cfg.form) end
  local use = cfg.form == "fast" and fast or prims
  local d, H = cfg.d_model, cfg.heads
  local w = { init = { "normal", std = 0.5 } }
  local x = nn.embedding("embed", cfg.vocab, d)(tokens)
  local B, T = x.shape[1], x.shape[2]
  local outs = {}
  for i, name in ipairs(ORDER) do
    outs[i] = use[name](nn.linear("in_" .. name, d, d, w)(x))
  end
  local function heads(name) return lrc.reshape(nn.linear(name, d, d, w)(x), { B, T, H, d // H }) end
  local q, k, v = heads("q"), heads("k"), heads("v")
  local a = cfg.form == "fast" and lrc.attention(q, k, v, { causal = true }) or attention_prims(q, k, v)
  outs[#outs + 1] = lrc.reshape(a, { B, T, d })
  return nn.linear("head", (#ORDER + 1) * d, cfg.vocab, { init = { "normal", std = 0.2 } })(
    lrc.concat(outs, { axis = -1 }))
end

return M
