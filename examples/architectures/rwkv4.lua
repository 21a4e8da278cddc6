-- RWKV-4, with Hugging Face's RwkvForCausalLM names: LayerNorm residual
-- blocks of time mixing and channel mixing, each reading a blend of the
-- token and the one before it (the token shift: a zero row joined in front by
-- lrc.concat); the WKV recurrence as two lrc.scan, the numerator
-- a_t = e^w a_{t-1} + e^{k_t} v_t and the denominator b_t = e^w b_{t-1} +
-- e^{k_t}, read one step late beside the bonus e^{u + k_t} of the current
-- token. The scans hold the plain sums, without the reference kernel's
-- running maximum of the exponents: e^k overflows f32 for keys past 88, so
-- this form is for models whose keys stay well below that.
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = {}

M.description = "RWKV-4 language model: token shift by concat, the WKV recurrence as two lrc.scan"

M.defaults = { d_model = 256, n_layers = 2, d_ff = 1024, vocab = 256, eps = 1e-5 }

local function layernorm(name, d, eps)
  local w = lrc.param(name .. ".weight", { d }, "ones", "norm")
  local b = lrc.param(name .. ".bias", { d }, "zeros", "norm")
  return function(x) return lrc.layernorm(x, { eps = eps }) * w + b end
end

-- x one position later along the sequence: row t holds x[t - 1], row 0 zeros
local function shift(x)
  local B, T, d = x.shape[1], x.shape[2], x.shape[3]
  local zero = lrc.full({ B, 1, d }, 0)
  if T == 1 then return zero end
  return lrc.concat({ zero, lrc.slice(x, { axis = 1, start = 0, size = T - 1 }) }, { axis = 1 })
end

-- x * mix + shifted * (1 - mix), mix a learned [1, 1, d] per channel
local function time_mix(name, d, x, shifted)
  local mix = lrc.param(name, { 1, 1, d }, { "const", value = 0.5 }, "mix")
  return x * mix + shifted * (1 - mix)
end

local function time_mixing(p, d, x)
  local B, T = x.shape[1], x.shape[2]
  local s = shift(x)
  local k = nn.linear(p .. ".key", d, d)(time_mix(p .. ".time_mix_key", d, x, s))
  local v = nn.linear(p .. ".value", d, d)(time_mix(p .. ".time_mix_value", d, x, s))
  local r = lrc.sigmoid(nn.linear(p .. ".receptance", d, d)(time_mix(p .. ".time_mix_receptance", d, x, s)))
  local decay = lrc.param(p .. ".time_decay", { d }, "zeros", "mix")
  local first = lrc.param(p .. ".time_first", { d }, "zeros", "mix")
  -- e^w with w = -e^time_decay, one per channel, at every step
  local a = lrc.expand(lrc.exp(-lrc.exp(decay)), { B, T, d })
  local ek = lrc.exp(k)
  local num = shift(lrc.scan(a, ek * v, { axis = 1 }))
  local den = shift(lrc.scan(a, ek, { axis = 1 }))
  local bonus = lrc.exp(k + first)
  local wkv = (num + bonus * v) / (den + bonus)
  return nn.linear(p .. ".output", d, d)(r * wkv)
end

local function channel_mixing(p, cfg, x)
  local d = cfg.d_model
  local s = shift(x)
  local k = nn.linear(p .. ".key", d, cfg.d_ff)(time_mix(p .. ".time_mix_key", d, x, s))
  local r = nn.linear(p .. ".receptance", d, d)(time_mix(p .. ".time_mix_receptance", d, x, s))
  local relu_k = lrc.relu(k)
  return lrc.sigmoid(r) * nn.linear(p .. ".value", cfg.d_ff, d)(relu_k * relu_k)
end

function M.build(cfg, tokens)
  for _, k in ipairs({ "d_model", "n_layers", "d_ff", "vocab" }) do nn.positive_int(cfg[k], k) end
  local d = cfg.d_model
  local h = nn.embedding("rwkv.embeddings", cfg.vocab, d)(tokens)
  h = layernorm("rwkv.blocks.0.pre_ln", d, cfg.eps)(h)
  for l = 0, cfg.n_layers - 1 do
    local p = "rwkv.blocks." .. l
    h = h + time_mixing(p .. ".attention", d, layernorm(p .. ".ln1", d, cfg.eps)(h))
    h = h + channel_mixing(p .. ".feed_forward", cfg, layernorm(p .. ".ln2", d, cfg.eps)(h))
  end
  h = layernorm("rwkv.ln_out", d, cfg.eps)(h)
  return nn.linear("head", d, cfg.vocab)(h)
end

return M
