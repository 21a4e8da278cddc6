-- BERT for masked language modelling (Hugging Face BertForMaskedLM names),
-- post-LayerNorm, on a right-padded batch. The padding mask is an additive
-- attention bias built from the run-time input `attention_mask` (F32
-- [B, T], 1 for a token, 0 for padding): (1 - m) * finfo(f32).min, a row
-- [B, 1, 1, T] per sequence spread over the query rows by a broadcast add,
-- as transformers adds it. Primitives: embedding (words, learned positions,
-- token types), layernorm with gains and biases, linear maps with biases,
-- lrc.attention with `bias` (bidirectional), the erf GELU, and the MLM head
-- dense -> GELU -> LayerNorm -> the word embeddings transposed + a bias.
-- `lrc backward` scores the positions of the input's `labels` (-100 not).
local lrc = require "lrc"
local nn = require "lrc.nn"

local M = {}

M.description = "BERT masked LM, post-LN, a padding mask as an attention bias (Hugging Face bert layout)"

M.defaults = {
  d_model = 256, n_layers = 2, n_heads = 4, d_ff = 1024, vocab = 256, n_positions = 512, type_vocab = 2, eps = 1e-12,
}

M.presets = {}

local F32_MIN = -3.4028234663852886e38 -- torch.finfo(torch.float32).min

local function layernorm(name, d, eps)
  local w = lrc.param(name .. ".weight", { d }, "ones", "norm")
  local b = lrc.param(name .. ".bias", { d }, "zeros", "norm")
  return function(x) return lrc.layernorm(x, { eps = eps }) * w + b end
end

local function linear(name, d_in, d_out) return nn.linear(name, d_in, d_out, { bias = true }) end

function M.build(cfg, tokens)
  for _, k in ipairs({ "d_model", "n_layers", "n_heads", "d_ff", "vocab", "n_positions", "type_vocab" }) do
    nn.positive_int(cfg[k], k)
  end
  local d, H = cfg.d_model, cfg.n_heads
  if d % H ~= 0 then error(string.format("n_heads (%d) must divide d_model (%d)", H, d)) end
  local B, T, dh = tokens.shape[1], tokens.shape[2], d // H
  if T > cfg.n_positions then
    error(string.format("a sequence of %d is longer than the %d learned positions (n_positions)", T, cfg.n_positions))
  end
  local mask = lrc.input("attention_mask", { B, T }, "f32", { default = 1 })
  local types = lrc.input("token_type_ids", { B, T }, "i32", { default = 0 })
  -- 0 where a key counts, finfo(f32).min where it is padding: [B, 1, 1, T] over [1, 1, T, T]
  local bias = lrc.reshape((1 - mask) * F32_MIN, { B, 1, 1, T }) + lrc.full({ 1, 1, T, T }, 0)

  local p = "bert.embeddings"
  local words = nn.embedding(p .. ".word_embeddings", cfg.vocab, d)
  local pos = lrc.param(p .. ".position_embeddings.weight", { cfg.n_positions, d }, { "normal", std = 0.02 }, "embedding")
  local h = words(tokens) + lrc.slice(pos, { axis = 0, start = 0, size = T, positions = true }) +
      nn.embedding(p .. ".token_type_embeddings", cfg.type_vocab, d)(types)
  h = layernorm(p .. ".LayerNorm", d, cfg.eps)(h)
  for l = 0, cfg.n_layers - 1 do
    local a = "bert.encoder.layer." .. l
    local function heads(name) return lrc.reshape(linear(a .. ".attention.self." .. name, d, d)(h), { B, T, H, dh }) end
    local y = lrc.attention(heads("query"), heads("key"), heads("value"), { bias = bias, scale = 1 / math.sqrt(dh) })
    y = linear(a .. ".attention.output.dense", d, d)(lrc.reshape(y, { B, T, d }))
    h = layernorm(a .. ".attention.output.LayerNorm", d, cfg.eps)(h + y)
    local f = linear(a .. ".output.dense", cfg.d_ff, d)(lrc.gelu(linear(a .. ".intermediate.dense", d, cfg.d_ff)(h)))
    h = layernorm(a .. ".output.LayerNorm", d, cfg.eps)(h + f)
  end
  local c = "cls.predictions"
  h = layernorm(c .. ".transform.LayerNorm", d, cfg.eps)(lrc.gelu(linear(c .. ".transform.dense", d, d)(h)))
  local out_bias = lrc.param(c .. ".bias", { cfg.vocab }, "zeros", "linear")
  return lrc.matmul(h, words.weight) + out_bias -- the decoder is the word embeddings
end

return M
